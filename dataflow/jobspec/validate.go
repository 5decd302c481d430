package jobspec

import (
	"fmt"
	"strings"
)

// validate fills defaults and checks what the structure alone cannot: that
// names are unique, inputs exist, the graph has no cycle and each node is
// exactly one kind.
func (s *Spec) validate(loc string) error {
	if strings.TrimSpace(s.Name) == "" {
		return invalidf("%s: the job has no name (add `name: my-job`)", loc)
	}
	if s.Parallelism < 0 || s.MaxParallelism < 0 || s.BatchSize < 0 {
		return invalidf("%s: parallelism, max_parallelism and batch_size must not be negative", loc)
	}
	if s.Parallelism == 0 {
		s.Parallelism = DefaultParallelism
	}
	if s.MaxParallelism == 0 {
		s.MaxParallelism = DefaultMaxParallelism
	}
	if s.BatchSize == 0 {
		s.BatchSize = DefaultBatchSize
	}
	if s.BatchSize > MaxBatchSize {
		return invalidf("%s: batch_size %d is larger than %d", loc, s.BatchSize, MaxBatchSize)
	}
	if s.BufferTimeout < 0 {
		return invalidf("%s: buffer_timeout must not be negative (0 sends every batch at once; leave it out for %v)", loc, DefaultBufferTimeout)
	}
	switch s.StateBackend {
	case "":
		s.StateBackend = BackendPebble
	case BackendPebble, BackendMemory:
	default:
		return invalidf("%s: state_backend %q is not one of pebble, memory", loc, s.StateBackend)
	}
	if c := s.Checkpoint; c != nil {
		switch {
		case c.Interval <= 0:
			return invalidf("%s: checkpoint needs a positive interval (e.g. interval: 10s)", loc)
		case c.Timeout < 0 || c.MinPause < 0 || c.Retain < 0:
			return invalidf("%s: checkpoint timeout, min_pause and retain must not be negative", loc)
		case c.Storage != "" && !strings.HasPrefix(c.Storage, "file://") && !strings.HasPrefix(c.Storage, "s3://"):
			return invalidf("%s: checkpoint storage %q is not a file:// or s3:// URL", loc, c.Storage)
		}
		if c.Timeout == 0 {
			c.Timeout = DefaultCheckpointTimeout
		}
		if c.Retain == 0 {
			c.Retain = DefaultCheckpointRetain
		}
	}
	if len(s.Nodes) == 0 {
		return invalidf("%s: the job has no nodes", loc)
	}
	byName := map[string]*Node{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Name == "" {
			return errAt(loc, n.Line, "node %d has no name", i+1)
		}
		if prev, dup := byName[n.Name]; dup {
			return errAt(loc, n.Line, "node name %q is already used on line %d", n.Name, prev.Line)
		}
		byName[n.Name] = n
		if n.Parallelism < 0 {
			return errAt(loc, n.Line, "node %q: parallelism must not be negative", n.Name)
		}
		if s.NodeParallelism(n) > s.MaxParallelism {
			return errAt(loc, n.Line, "node %q: parallelism %d is above max_parallelism %d", n.Name, s.NodeParallelism(n), s.MaxParallelism)
		}
		if err := n.checkKind(loc, s.Checkpoint != nil); err != nil {
			return err
		}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Window == nil || n.Window.LateOutput == "" {
			continue
		}
		if prev, dup := byName[n.Window.LateOutput]; dup {
			return errAt(loc, n.Line, "node %q: late_output %q is already the name of a node or output (line %d)", n.Name, n.Window.LateOutput, prev.Line)
		}
		byName[n.Window.LateOutput] = n
	}
	consumed := map[string]bool{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		seen := map[string]bool{}
		for _, in := range n.Input {
			src, ok := byName[in]
			if !ok {
				return errAt(loc, n.Line, "node %q: input %q is not a node of this job%s", n.Name, in, nearest(in, byName))
			}
			if seen[in] {
				return errAt(loc, n.Line, "node %q: input %q is listed twice", n.Name, in)
			}
			seen[in] = true
			if src.Sink != nil {
				return errAt(loc, n.Line, "node %q: input %q is a sink, which has no output", n.Name, in)
			}
			consumed[in] = true
		}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.Sink == nil && !consumed[n.Name] {
			return errAt(loc, n.Line, "node %q: its output goes nowhere (no node has `input: %s`; end the path with a sink)", n.Name, n.Name)
		}
	}
	return s.checkAcyclic(loc, byName)
}

func nearest(name string, byName map[string]*Node) string {
	best, bestD := "", 3
	for n := range byName {
		if d := editDistance(name, n); d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func (n *Node) checkKind(loc string, checkpointing bool) error {
	kinds := 0
	for _, set := range []bool{n.Source != nil, n.Wasm != nil, n.Window != nil, n.Sink != nil, n.Join != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return errAt(loc, n.Line, "node %q must have exactly one of source, wasm, window, join or sink (it has %d)", n.Name, kinds)
	}
	if n.EventTime != nil && n.Source == nil {
		return errAt(loc, n.Line, "node %q: event_time belongs on a source node", n.Name)
	}
	if len(n.KeyBy) > 0 && (n.Source != nil || n.Sink != nil) {
		return errAt(loc, n.Line, "node %q: key_by applies to wasm and window nodes", n.Name)
	}
	if n.Aggregate != nil && n.Window == nil {
		return errAt(loc, n.Line, "node %q: aggregate needs a window", n.Name)
	}
	switch {
	case n.Source != nil:
		if len(n.Input) > 0 {
			return errAt(loc, n.Line, "node %q: a source has no input", n.Name)
		}
		if et := n.EventTime; et != nil && (et.MaxOutOfOrderness < 0 || et.IdleTimeout < 0) {
			return errAt(loc, n.Line, "node %q: event_time durations must not be negative", n.Name)
		}
		if k := n.Source.Kafka; k != nil {
			if err := k.Check(); err != nil {
				return errAt(loc, n.Line, "node %q: source.kafka: %v", n.Name, err)
			}
		}
		return oneOf(loc, n, "source", n.Source.Generator != nil, n.Source.File != nil, n.Source.Kafka != nil)
	case n.Join != nil:
		return n.checkJoin(loc)
	case n.Window != nil:
		if len(n.Input) == 0 {
			return errAt(loc, n.Line, "node %q needs an input", n.Name)
		}
		if len(n.KeyBy) == 0 {
			return errAt(loc, n.Line, "node %q: a window needs key_by (a JSON field or record_key)", n.Name)
		}
		if len(n.KeyBy) > 1 {
			return errAt(loc, n.Line, "node %q: a window has one key_by for all its inputs, not a list %s", n.Name, n.KeyBy)
		}
		return n.checkWindow(loc)
	case n.Sink != nil:
		if len(n.Input) == 0 {
			return errAt(loc, n.Line, "node %q: a sink needs an input", n.Name)
		}
		if n.Sink.File != nil && n.Sink.File.Path == "" {
			return errAt(loc, n.Line, "node %q: sink.file needs a path", n.Name)
		}
		if k := n.Sink.Kafka; k != nil {
			if err := k.Check(checkpointing); err != nil {
				return errAt(loc, n.Line, "node %q: sink.kafka: %v", n.Name, err)
			}
		}
		return oneOf(loc, n, "sink", n.Sink.File != nil, n.Sink.Stdout != nil, n.Sink.Discard != nil, n.Sink.Kafka != nil)
	default:
		if len(n.Input) == 0 {
			return errAt(loc, n.Line, "node %q needs an input", n.Name)
		}
		if n.Wasm.Module == "" {
			return errAt(loc, n.Wasm.Line, "node %q: wasm.module is missing", n.Name)
		}
		if len(n.KeyBy) > 1 && len(n.KeyBy) != 2 {
			return errAt(loc, n.Line, "node %q: key_by names %d keys; a two-input operator has two inputs and a key for each, key_by: [left, right]", n.Name, len(n.KeyBy))
		}
		if len(n.KeyBy) == 2 && len(n.Input) != 2 {
			return errAt(loc, n.Line, "node %q: key_by %s names a key per input, so the node needs two inputs, input: [left, right] (it has %d)", n.Name, n.KeyBy, len(n.Input))
		}
	}
	return nil
}

func oneOf(loc string, n *Node, what string, set ...bool) error {
	k := 0
	for _, s := range set {
		if s {
			k++
		}
	}
	if k != 1 {
		return errAt(loc, n.Line, "node %q: %s must name exactly one connector (it names %d)", n.Name, what, k)
	}
	return nil
}

func (s *Spec) checkAcyclic(loc string, byName map[string]*Node) error {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var visit func(n *Node) error
	visit = func(n *Node) error {
		switch state[n.Name] {
		case active:
			return errAt(loc, n.Line, "node %q is part of a cycle", n.Name)
		case done:
			return nil
		}
		state[n.Name] = active
		for _, in := range n.Input {
			if err := visit(byName[in]); err != nil {
				return err
			}
		}
		state[n.Name] = done
		return nil
	}
	for i := range s.Nodes {
		if err := visit(&s.Nodes[i]); err != nil {
			return err
		}
	}
	return nil
}

// State backends.
const (
	BackendPebble = "pebble"
	BackendMemory = "memory"
)

// Built-in aggregate kinds.
const (
	AggCount = "count"
	AggSum   = "sum"
	AggMin   = "min"
	AggMax   = "max"
	AggAvg   = "avg"
)

// ParseBuiltin splits "sum(amount)" into its kind and field; count has no
// field.
func ParseBuiltin(s string) (kind, field string, err error) {
	s = strings.TrimSpace(s)
	if s == AggCount || s == "count()" {
		return AggCount, "", nil
	}
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return "", "", fmt.Errorf("aggregate %q is not count, sum(field), min(field), max(field) or avg(field)", s)
	}
	kind, field = s[:open], strings.TrimSpace(s[open+1:len(s)-1])
	switch kind {
	case AggSum, AggMin, AggMax, AggAvg:
	default:
		return "", "", fmt.Errorf("aggregate %q: unknown function %q (want count, sum, min, max or avg)", s, kind)
	}
	if field == "" {
		return "", "", fmt.Errorf("aggregate %q needs a field, as in %s(amount)", s, kind)
	}
	return kind, field, nil
}

func (n *Node) checkWindow(loc string) error {
	w := n.Window
	kinds := 0
	for _, set := range []bool{w.Tumbling != nil, w.Sliding != nil, w.Session != nil, w.Global != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return errAt(loc, n.Line, "node %q: window must be exactly one of tumbling, sliding, session, global (it has %d)", n.Name, kinds)
	}
	switch {
	case w.Tumbling != nil && *w.Tumbling <= 0:
		return errAt(loc, n.Line, "node %q: tumbling window size must be positive", n.Name)
	case w.Sliding != nil && (w.Sliding.Size <= 0 || w.Sliding.Slide <= 0):
		return errAt(loc, n.Line, "node %q: sliding window needs a positive size and slide", n.Name)
	case w.Sliding != nil && w.Sliding.Slide > w.Sliding.Size:
		return errAt(loc, n.Line, "node %q: sliding window slide %s is larger than its size %s", n.Name, w.Sliding.Slide.D(), w.Sliding.Size.D())
	case w.Session != nil && w.Session.Gap <= 0:
		return errAt(loc, n.Line, "node %q: session window needs a positive gap", n.Name)
	case w.Global != nil && w.Global.Trigger.Count <= 0:
		return errAt(loc, n.Line, "node %q: global window needs trigger: {count: N} with N > 0", n.Name)
	case w.AllowedLateness < 0:
		return errAt(loc, n.Line, "node %q: allowed_lateness must not be negative", n.Name)
	}
	a := n.Aggregate
	if a == nil {
		return errAt(loc, n.Line, "node %q: a window needs an aggregate (count, sum(field), … or wasm)", n.Name)
	}
	set := 0
	for _, b := range []bool{len(a.Builtins) > 0, a.Wasm != nil, a.Apply != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return errAt(loc, n.Line, "node %q: aggregate must be built-ins, wasm or apply (it has %d)", n.Name, set)
	}
	for _, b := range a.Builtins {
		if _, _, err := ParseBuiltin(b); err != nil {
			return errAt(loc, n.Line, "node %q: %v", n.Name, err)
		}
	}
	for _, m := range []*WasmSpec{a.Wasm, a.Apply} {
		if m != nil && m.Module == "" {
			return errAt(loc, n.Line, "node %q: aggregate module is missing", n.Name)
		}
	}
	switch a.Name {
	case "":
	case "key", "window_start", "window_end":
		return errAt(loc, n.Line, "node %q: aggregate name %q is a field every window result has already", n.Name, a.Name)
	default:
		if a.Wasm == nil {
			return errAt(loc, n.Line, "node %q: aggregate name applies to a wasm aggregate only (built-ins are named after themselves, a window function emits its own records)", n.Name)
		}
	}
	return nil
}

// checkJoin checks a join node: two inputs, a key for each, exactly one of
// interval or window, and bounds that leave a non-empty interval.
func (n *Node) checkJoin(loc string) error {
	j := n.Join
	switch {
	case len(n.Input) != 2:
		return errAt(loc, n.Line, "node %q: a join needs exactly two inputs, input: [left, right] (it has %d)", n.Name, len(n.Input))
	case len(n.KeyBy) > 0:
		return errAt(loc, n.Line, "node %q: a join is keyed by join.left_key and join.right_key, not key_by", n.Name)
	case j.LeftKey == "" || j.RightKey == "":
		return errAt(loc, n.Line, "node %q: a join needs join.left_key and join.right_key (a JSON field or record_key of each input)", n.Name)
	case (j.Interval == nil) == (j.Window == nil):
		return errAt(loc, n.Line, "node %q: join must have exactly one of interval or window", n.Name)
	}
	if iv := j.Interval; iv != nil {
		lo, hi := iv.Lower.D().Milliseconds(), iv.Upper.D().Milliseconds()
		if iv.LowerInclusive != nil && !*iv.LowerInclusive {
			lo++
		}
		if iv.UpperInclusive != nil && !*iv.UpperInclusive {
			hi--
		}
		if iv.Lower > iv.Upper {
			return errAt(loc, n.Line, "node %q: join.interval lower %s is above upper %s", n.Name, iv.Lower.D(), iv.Upper.D())
		}
		if lo > hi {
			return errAt(loc, n.Line, "node %q: join.interval from %s to %s without its exclusive bounds holds no millisecond", n.Name, iv.Lower.D(), iv.Upper.D())
		}
		return nil
	}
	w := j.Window
	if w.Global != nil {
		return errAt(loc, n.Line, "node %q: a window join takes a tumbling, sliding or session window (global is not supported)", n.Name)
	}
	if w.AllowedLateness != 0 || w.LateOutput != "" {
		return errAt(loc, n.Line, "node %q: a window join has no allowed_lateness or late_output (late records are dropped and counted)", n.Name)
	}
	kinds := 0
	for _, set := range []bool{w.Tumbling != nil, w.Sliding != nil, w.Session != nil} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return errAt(loc, n.Line, "node %q: join.window must be exactly one of tumbling, sliding or session (it has %d)", n.Name, kinds)
	case w.Session != nil && w.Session.Gap.D().Milliseconds() < 1:
		return errAt(loc, n.Line, "node %q: join.window session gap must be at least 1ms", n.Name)
	case w.Tumbling != nil && w.Tumbling.D().Milliseconds() < 1:
		return errAt(loc, n.Line, "node %q: join.window tumbling size must be at least 1ms", n.Name)
	case w.Sliding != nil && (w.Sliding.Size.D().Milliseconds() < 1 || w.Sliding.Slide.D().Milliseconds() < 1):
		return errAt(loc, n.Line, "node %q: join.window sliding needs a size and slide of at least 1ms", n.Name)
	case w.Sliding != nil && w.Sliding.Slide > w.Sliding.Size:
		return errAt(loc, n.Line, "node %q: join.window sliding slide %s is larger than its size %s", n.Name, w.Sliding.Slide.D(), w.Sliding.Size.D())
	}
	return nil
}
