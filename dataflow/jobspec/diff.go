package jobspec

// Diffing two specs of one job, for `eddy job upgrade`, and overriding a
// node's module, for the deployments of a job after a hot swap
// (docs/rfcs/2026-12-02-hot-swap.md).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// SpecDiff is what an upgrade from one spec of a job to another changes
// that can be applied without a new job: module versions and
// configurations of Wasm nodes (each a hot swap), and parallelism (a
// stop-with-savepoint and a restore).
type SpecDiff struct {
	// Changes are the Wasm nodes whose module or configuration changed, in
	// the new spec's node order.
	Changes []NodeChange
	// Rescale is set when the parallelism of a node other than a source
	// changed (a source's is refused). A
	// rescale restarts the job from a savepoint with the whole new spec,
	// so Changes then take effect with it rather than one swap at a time.
	Rescale bool
}

// Empty reports whether the two specs run the same job.
func (d *SpecDiff) Empty() bool { return len(d.Changes) == 0 && !d.Rescale }

// NodeChange is one Wasm node whose module or configuration changed.
type NodeChange struct {
	Node string
	// Module is the new module reference as written in the new spec, or
	// "" when it did not change.
	Module string
	// Config is the new configuration as a JSON object when it changed,
	// else nil; ConfigChanged says which.
	Config        []byte
	ConfigChanged bool
}

// ErrNotInPlace marks the errors of Diff about a change that neither a
// hot swap nor a rescale can apply (errors.Is).
var ErrNotInPlace = errors.New("jobspec: the change cannot be applied to the running job")

// DiffError is a difference between two specs of a job that Diff refuses:
// Change says what changed, Advice what to do instead, with "JOB" where
// the job's id goes (For fills it in).
type DiffError struct {
	Change string
	Advice string
}

func (e *DiffError) Error() string        { return e.Change + ": " + e.Advice }
func (e *DiffError) Is(target error) bool { return target == ErrNotInPlace }

// For is the error's line with the job's id in the advice.
func (e *DiffError) For(job string) string {
	return e.Change + ": " + strings.ReplaceAll(e.Advice, "JOB", job)
}

// adviceRestart is what to do about a change of topology (or of another
// setting the running job cannot take): what Flink users do for every
// upgrade.
const adviceRestart = "a topology change cannot be applied in place; stop the job with a savepoint " +
	"(eddy savepoint create JOB --stop) and submit the new spec with --from-savepoint"

func refuse(advice, format string, args ...any) error {
	return &DiffError{Change: fmt.Sprintf(format, args...), Advice: advice}
}

// Diff compares the spec a job runs (old, as submitted) with a new spec
// for it. Both must have been parsed (defaults filled in). It returns the
// changes that can be applied to the running job, or a *DiffError naming
// the first difference that cannot: a node added, removed or of another
// kind, other inputs, key_by, sources, sinks, windows or event time, the
// job's name, max_parallelism (it fixes the key groups of keyed state) or
// another job-level setting.
//
// Module references are compared as written ("counter" and "counter@2"
// differ even when 2 is the latest version: the server resolves them);
// configurations are compared as JSON values.
func Diff(old, new *Spec) (*SpecDiff, error) {
	if old == nil || new == nil {
		return nil, errors.New("jobspec: diff of a nil spec")
	}
	if old.Name != new.Name {
		return nil, refuse("an upgrade keeps the job's name; to run the new spec as another job, stop this one "+
			"with a savepoint (eddy savepoint create JOB --stop) and submit the new spec with --from-savepoint",
			"the job's name changed from %s to %s", old.Name, new.Name)
	}
	if old.MaxParallelism != new.MaxParallelism {
		return nil, refuse(fmt.Sprintf("it fixes the key groups of the job's keyed state, which no savepoint can be restored into "+
			"with another count; keep max_parallelism: %d (or submit the new spec as a new job with empty state)", old.MaxParallelism),
			"max_parallelism changed from %d to %d", old.MaxParallelism, new.MaxParallelism)
	}
	if err := diffSettings(old, new); err != nil {
		return nil, err
	}
	for i := range old.Nodes {
		if new.Node(old.Nodes[i].Name) == nil {
			return nil, refuse(adviceRestart, "node %s was removed", old.Nodes[i].Name)
		}
	}
	// Only the parallelism nodes run at counts: a job-level change that
	// every node overrides changes nothing.
	d := &SpecDiff{}
	for i := range new.Nodes {
		n := &new.Nodes[i]
		o := old.Node(n.Name)
		if o == nil {
			return nil, refuse(adviceRestart, "node %s was added", n.Name)
		}
		if err := diffTopology(o, n); err != nil {
			return nil, err
		}
		if op, np := old.NodeParallelism(o), new.NodeParallelism(n); op != np {
			// Keyed state moves by key groups, but a source's position
			// in a savepoint belongs to its split of the input: a
			// restore at another parallelism is refused (dataflow).
			if n.Source != nil {
				return nil, refuse(fmt.Sprintf("a source resumes from a savepoint only with the same split of its input; "+
					"keep parallelism: %d on node %s and change the parallelism of the others", op, n.Name),
					"node %s: the parallelism of a source changed from %d to %d", n.Name, op, np)
			}
			d.Rescale = true
		}
		c, err := diffModule(o, n)
		if err != nil {
			return nil, err
		}
		if c != nil {
			d.Changes = append(d.Changes, *c)
		}
	}
	return d, nil
}

// diffSettings refuses a change of the job-level settings other than
// parallelism. They would apply through a restart, not a swap, and an
// upgrade that restarts the job for a batch size is better asked for
// explicitly.
func diffSettings(old, new *Spec) error {
	settings := []struct {
		name     string
		old, new any
	}{
		{"batch_size", old.BatchSize, new.BatchSize},
		{"buffer_timeout", old.BufferTimeout.D(), new.BufferTimeout.D()},
		{"state_backend", old.StateBackend, new.StateBackend},
	}
	for _, s := range settings {
		if s.old != s.new {
			return refuse(adviceRestart, "%s changed from %v to %v", s.name, s.old, s.new)
		}
	}
	if !reflect.DeepEqual(old.Checkpoint, new.Checkpoint) {
		return refuse(adviceRestart, "the checkpoint section changed")
	}
	return nil
}

// Kind names what a node is, as the spec writes it: "source", "sink",
// "window" or "wasm".
func (n *Node) Kind() string {
	switch {
	case n.Source != nil:
		return "source"
	case n.Sink != nil:
		return "sink"
	case n.Window != nil:
		return "window"
	case n.Join != nil:
		return "join"
	default:
		return "wasm"
	}
}

// diffTopology refuses every difference of node o and n but the module
// and configuration of their Wasm operator and their parallelism.
func diffTopology(o, n *Node) error {
	if o.Kind() != n.Kind() {
		return refuse(adviceRestart, "node %s: changed from a %s node to a %s node", n.Name, o.Kind(), n.Kind())
	}
	if oi, ni := sortedInputs(o.Input), sortedInputs(n.Input); !slices.Equal(oi, ni) {
		return refuse(adviceRestart, "node %s: input changed from %s to %s", n.Name, listOrNone(oi), listOrNone(ni))
	}
	if n.Join != nil && !slices.Equal(o.Input, n.Input) {
		// A join's inputs are ordered: the first is the left side.
		return refuse(adviceRestart, "node %s: join inputs changed from %s to %s", n.Name, listOrNone(o.Input), listOrNone(n.Input))
	}
	if !slices.Equal(o.KeyBy, n.KeyBy) {
		return refuse(adviceRestart, "node %s: key_by changed from %s to %s", n.Name, orNone(o.KeyBy.String()), orNone(n.KeyBy.String()))
	}
	parts := []struct {
		name     string
		old, new any
	}{
		{"source", o.Source, n.Source},
		{"event_time", o.EventTime, n.EventTime},
		{"sink", o.Sink, n.Sink},
		{"window", o.Window, n.Window},
		{"join", o.Join, n.Join},
	}
	for _, p := range parts {
		if !reflect.DeepEqual(p.old, p.new) {
			return refuse(adviceRestart, "node %s: its %s changed", n.Name, p.name)
		}
	}
	if oa, na := o.Aggregate, n.Aggregate; oa != nil && na != nil {
		switch {
		case !slices.Equal(oa.Builtins, na.Builtins):
			return refuse(adviceRestart, "node %s: aggregate changed from %s to %s", n.Name, aggregateKind(oa), aggregateKind(na))
		case (oa.Wasm == nil) != (na.Wasm == nil) || (oa.Apply == nil) != (na.Apply == nil):
			return refuse(adviceRestart, "node %s: aggregate changed from %s to %s", n.Name, aggregateKind(oa), aggregateKind(na))
		case oa.Name != na.Name:
			return refuse(adviceRestart, "node %s: aggregate name changed from %s to %s", n.Name, orNone(oa.Name), orNone(na.Name))
		}
	}
	return nil
}

func aggregateKind(a *AggregateSpec) string {
	switch {
	case a.Wasm != nil:
		return "a wasm aggregate"
	case a.Apply != nil:
		return "a wasm window function (apply)"
	default:
		return strings.Join(a.Builtins, ", ")
	}
}

func sortedInputs(in Inputs) []string {
	s := slices.Clone([]string(in))
	slices.Sort(s)
	return s
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// wasmOf is the one Wasm operator of a node (a wasm node's, or a window's
// wasm aggregate or window function), or nil.
func (n *Node) wasmOf() *WasmSpec {
	if ms := n.Modules(); len(ms) > 0 {
		return ms[0]
	}
	return nil
}

// diffModule is the change of node n's Wasm operator from o's, or nil.
// diffTopology has checked that both have one or neither.
func diffModule(o, n *Node) (*NodeChange, error) {
	ow, nw := o.wasmOf(), n.wasmOf()
	if ow == nil || nw == nil {
		return nil, nil
	}
	oc, err := ow.ConfigJSON()
	if err != nil {
		return nil, fmt.Errorf("node %s: running spec: %w", o.Name, err)
	}
	nc, err := nw.ConfigJSON()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	c := NodeChange{Node: n.Name}
	if ow.Module != nw.Module {
		c.Module = nw.Module
	}
	if !bytes.Equal(oc, nc) {
		c.Config, c.ConfigChanged = nc, true
	}
	if c.Module == "" && !c.ConfigChanged {
		return nil, nil
	}
	return &c, nil
}

// ConfigJSON is the configuration as the module's eddy_open receives it:
// a JSON object ({} when there is none). encoding/json writes the keys of
// a map in order, so two configurations that are equal as JSON values
// give the same bytes.
func (w *WasmSpec) ConfigJSON() ([]byte, error) {
	cfg := w.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("config is not representable as JSON: %w", err)
	}
	return b, nil
}

// Override replaces the module reference and the configuration of the
// Wasm operator of a node, as a completed hot swap does for every later
// deployment of the job. An empty module keeps the node's module; an
// empty config keeps its configuration (protobuf does not tell an empty
// bytes field from an absent one), any other must be a JSON object.
func (s *Spec) Override(node, module string, config []byte) error {
	n := s.Node(node)
	if n == nil {
		return fmt.Errorf("override of node %q: job %s has no such node", node, s.Name)
	}
	w := n.wasmOf()
	if w == nil {
		return fmt.Errorf("override of node %q: it is a %s node, which runs no Wasm module", node, n.Kind())
	}
	var cfg map[string]any
	if len(config) > 0 {
		var err error
		if cfg, err = DecodeConfig(config); err != nil {
			return fmt.Errorf("override of node %q: %w", node, err)
		}
	}
	if module != "" {
		w.Module = module
	}
	if len(config) > 0 {
		w.Config = cfg
	}
	return nil
}

// DecodeConfig decodes a node's configuration written as JSON; it must be
// one JSON object. Numbers stay as written (json.Number), so that a large
// integer reaches the module unchanged.
func DecodeConfig(config []byte) (map[string]any, error) {
	trimmed := bytes.TrimSpace(config)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("config must be a JSON object, as in {\"currency\": \"EUR\"}")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	cfg := map[string]any{}
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("config is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("config has more after its JSON object")
	}
	return cfg, nil
}
