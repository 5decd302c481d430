package dataflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/state"
)

// Connectors builds the sources and sinks a spec names. Package connectors
// implements it; the interface is here so dataflow does not depend on every
// connector.
type Connectors interface {
	NewSource(spec *jobspec.SourceSpec, baseDir string) (stream.Source, error)
	NewSink(spec *jobspec.SinkSpec, baseDir string) (stream.Sink, error)
}

// Options wire a job to the process it runs in.
type Options struct {
	Connectors Connectors
	// Engine runs the job's Wasm modules; shared by every job of a process.
	Engine *host.Engine
	// LoadModule resolves a wasm node's module reference. The default reads
	// the reference as a path relative to the spec file.
	LoadModule func(ctx context.Context, ref string) (*host.Module, error)
	// NativeOperators replaces the module reference named by a key with an
	// operator written in Go: the benchmark's baseline, and built-ins.
	NativeOperators map[string]func() stream.Operator
	// StateBackends opens (or returns the process's shared) state backend of
	// a kind named by the spec: jobspec.BackendPebble or BackendMemory.
	// Required by jobs with keyed nodes.
	StateBackends func(kind string) (state.Backend, error)
	// WindowOperator builds the operator of a window node (package
	// dataflow/window); the modules map holds the job's loaded modules.
	WindowOperator func(spec *jobspec.Spec, node *jobspec.Node, modules map[string]*host.Module) (stream.Operator, error)
	// Tenant owns the job's state; "default" until tenancy lands.
	Tenant string
	// Gate admits every guest call of the job's tasks: on a worker, the
	// tenant's CPU share (package dataflow/cpushare). nil: none.
	Gate stream.Gate
	// StateLimit bounds the keyed state of the whole job in bytes (its
	// tenant's state_bytes quota): a task whose keyed state alone exceeds
	// it fails with that line, checked about once a second. 0: no bound.
	StateLimit int64
	// QueueCapacity is the number of batches an input queue holds before
	// its producers block (backpressure). Default 8.
	QueueCapacity int
	Logger        *slog.Logger
	// TLS are the credentials tasks dial other workers' Exchange with
	// (nil: plaintext). A worker's Exchange requires a certificate of the
	// cluster CA when it has TLS.
	TLS *rpc.Credentials
	// ManualProcessingTime makes processing time a script's: it starts at
	// 0 and moves only when the source reports an advance
	// (stream.ProcessingTimeSource), which travels to the downstream
	// tasks in band, like a watermark, so that timers fire at the same
	// place in the stream on every run; the wall clock is not read. For
	// the local harness (dataflow/localrun), whose jobs run in one
	// process: an advance does not cross a remote exchange.
	ManualProcessingTime bool
}

// ErrJobFailed marks the error of a job whose task failed.
var ErrJobFailed = errors.New("dataflow: job failed")

// jobError reads "job NAME failed: cause" and matches ErrJobFailed and
// everything the cause matches.
type jobError struct {
	job string
	err error
}

func (e *jobError) Error() string   { return fmt.Sprintf("job %s failed: %v", e.job, e.err) }
func (e *jobError) Unwrap() []error { return []error{ErrJobFailed, e.err} }

// NodeStats counts the records through one node, over all its subtasks.
type NodeStats struct {
	Name        string
	Kind        string
	Parallelism int
	In          atomic.Int64
	Out         atomic.Int64
	// progress is, per subtask of a source node whose source is a
	// stream.ProgressReporter, what it said last (nil for other nodes).
	progress []subtaskProgress
}

// subtaskProgress is one source subtask's done and total; total < 0
// until the source told.
type subtaskProgress struct{ done, total atomic.Int64 }

func newProgress(parallelism int) []subtaskProgress {
	p := make([]subtaskProgress, parallelism)
	for i := range p {
		p[i].total.Store(-1)
	}
	return p
}

// setProgress records what subtask's source reported.
func (s *NodeStats) setProgress(subtask int, done, total int64) {
	if subtask < 0 || subtask >= len(s.progress) {
		return
	}
	s.progress[subtask].done.Store(done)
	s.progress[subtask].total.Store(total)
}

// progressSum is done and total over the subtasks, known only once every
// subtask reported: a fraction over some of them would run ahead.
func (s *NodeStats) progressSum() (done, total int64, known bool) {
	if len(s.progress) == 0 {
		return 0, 0, false
	}
	for i := range s.progress {
		t := s.progress[i].total.Load()
		if t < 0 {
			return 0, 0, false
		}
		done += s.progress[i].done.Load()
		total += t
	}
	return done, total, true
}

// NodeSummary is a snapshot of NodeStats.
type NodeSummary struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Parallelism int    `json:"parallelism"`
	In          int64  `json:"records_in"`
	Out         int64  `json:"records_out"`
	// Done of Total (in the source's unit, bytes or records) is how far
	// a source node is through a bounded input, when ProgressKnown: what
	// the progress of `eddy run` shows, not part of the summary it prints.
	Done          int64 `json:"-"`
	Total         int64 `json:"-"`
	ProgressKnown bool  `json:"-"`
}

// Summary is what a finished (or interrupted) run reports.
type Summary struct {
	Job     string        `json:"job"`
	Nodes   []NodeSummary `json:"nodes"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Job is a planned job: modules loaded and validated, connectors built.
type Job struct {
	id       string // unique in this process: state scopes use it
	tenant   string
	spec     *jobspec.Spec
	opts     Options
	vertices []*vertex
	chains   []*chain
	modules  map[string]*host.Module
	configs  map[*vertex][]byte
	log      *slog.Logger
	// taskMetrics are those of the current or last run, for TaskStats.
	taskMetrics atomic.Pointer[[]*taskMetrics]
}

// NewJob plans spec: it resolves the graph, loads and validates every
// module and checks every connector, without running anything.
func NewJob(ctx context.Context, spec *jobspec.Spec, opts Options) (*Job, error) {
	if opts.Connectors == nil {
		return nil, errors.New("dataflow: Options.Connectors is required")
	}
	if opts.QueueCapacity <= 0 {
		opts.QueueCapacity = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LoadModule == nil {
		if opts.Engine == nil && needsEngine(spec, opts) {
			return nil, errors.New("dataflow: Options.Engine is required for wasm nodes")
		}
		opts.LoadModule = func(ctx context.Context, ref string) (*host.Module, error) {
			return opts.Engine.Load(ctx, spec.Resolve(ref))
		}
	}
	vs, chains, err := plan(spec)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", spec.Name, err)
	}
	if opts.Tenant == "" {
		opts.Tenant = "default"
	}
	j := &Job{id: fmt.Sprintf("%s-%d", spec.Name, jobSeq.Add(1)), tenant: opts.Tenant, spec: spec, opts: opts, vertices: vs, chains: chains,
		modules: map[string]*host.Module{}, configs: map[*vertex][]byte{},
		log: opts.Logger.With("job", spec.Name)}
	for _, v := range vs {
		n := v.node
		if n.Keyed() && opts.StateBackends == nil {
			return nil, fmt.Errorf("job %s: node %q is keyed but this process has no state backend", spec.Name, n.Name)
		}
		for _, w := range n.Modules() {
			if _, native := opts.NativeOperators[w.Module]; native {
				continue
			}
			if _, ok := j.modules[w.Module]; !ok {
				m, err := opts.LoadModule(ctx, w.Module)
				if err != nil {
					return nil, fmt.Errorf("job %s: node %q (line %d): %w", spec.Name, n.Name, w.Line, err)
				}
				j.modules[w.Module] = m
			}
		}
		switch {
		case n.Wasm != nil:
			if m, ok := j.modules[n.Wasm.Module]; ok {
				if err := checkInputs(n, m); err != nil {
					return nil, fmt.Errorf("job %s: node %q (line %d): %w", spec.Name, n.Name, n.Wasm.Line, err)
				}
			}
			cfg := n.Wasm.Config
			if cfg == nil {
				cfg = map[string]any{}
			}
			b, err := json.Marshal(cfg)
			if err != nil {
				return nil, fmt.Errorf("job %s: node %q: config is not representable as JSON: %w", spec.Name, n.Name, err)
			}
			j.configs[v] = b
		case n.Source != nil:
			if _, err := opts.Connectors.NewSource(n.Source, spec.Dir()); err != nil {
				return nil, fmt.Errorf("job %s: node %q (line %d): %w", spec.Name, n.Name, n.Line, err)
			}
		case n.Sink != nil:
			if _, err := opts.Connectors.NewSink(n.Sink, spec.Dir()); err != nil {
				return nil, fmt.Errorf("job %s: node %q (line %d): %w", spec.Name, n.Name, n.Line, err)
			}
		}
	}
	return j, nil
}

func needsEngine(spec *jobspec.Spec, opts Options) bool {
	for i := range spec.Nodes {
		if w := spec.Nodes[i].Wasm; w != nil {
			if _, native := opts.NativeOperators[w.Module]; !native {
				return true
			}
		}
	}
	return false
}

var jobSeq atomic.Int64

// stateBackend returns the backend the spec chose.
func (j *Job) stateBackend() (state.Backend, error) {
	b, err := j.opts.StateBackends(j.spec.StateBackend)
	if err != nil {
		return nil, fmt.Errorf("state backend %s: %w", j.spec.StateBackend, err)
	}
	return b, nil
}

// Spec is the job's specification.
func (j *Job) Spec() *jobspec.Spec { return j.spec }

// Stats snapshots the per-node counters; safe while the job runs.
func (j *Job) Stats() []NodeSummary {
	out := make([]NodeSummary, len(j.vertices))
	for i, v := range j.vertices {
		out[i] = NodeSummary{Name: v.stats.Name, Kind: v.stats.Kind, Parallelism: v.parallelism, In: v.stats.In.Load(), Out: v.stats.Out.Load()}
		out[i].Done, out[i].Total, out[i].ProgressKnown = v.stats.progressSum()
	}
	return out
}
