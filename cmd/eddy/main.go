// Command eddy is the one Eddy binary: the CLI (jobs, modules, cluster
// info), the three server modes (coordinator, worker, standalone) and
// `eddy run`, which runs a job on an embedded standalone cluster.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
)

const usage = `eddy — stateful stream processing with WebAssembly operators

usage:
  eddy run [flags] JOB.yaml       run a job on an embedded standalone cluster until it ends (bounded) or is interrupted
  eddy validate [flags] JOB.yaml  check a job spec and load and validate its modules
  eddy test MODULE.wasm [flags]   run one module locally over JSON lines (--key-by, --event-time, --window, --expect)

  eddy standalone [flags]         a coordinator and a worker in one process
  eddy coordinator [flags]        a coordinator (Raft member): --bootstrap the first, --join the others
  eddy worker [flags]             a worker: --coordinator ADDR --slots N

  eddy module upload|list|get     the module registry
  eddy job submit|list|status|cancel|logs
  eddy job swap|upgrade           hot swap: a node's module or configuration in place, or a new spec of the job
  eddy savepoint create           take a savepoint of a running job (--stop: then cancel it)
  eddy cluster info               coordinators, the leader, workers and their slots
  eddy certs init DIR             a CA and a member certificate for a TLS cluster (--certs DIR on every server)

  eddy context set|use|list|delete  named coordinators and their credentials (the CLI's config file)
  eddy token create|list|revoke   API tokens: admin, developer or viewer of one tenant
  eddy audit list                 every mutating call: who, what, when, outcome (admins)
  eddy whoami                     the token in use: its id, tenant and role

Client commands send an API token: env EDDY_TOKEN, else the context's. A new
cluster's first coordinator writes an admin token to DATA-DIR/admin.token;
eddy standalone also adds it as the context "local".
  eddy tenant create|list|delete|quota   tenants and their quotas (admin)
  eddy new NAME --lang go|c|rust|as [--kind operator|keyed|aggregate|window]   scaffold an operator project

Run 'eddy COMMAND -h' for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:], stdout, stderr)
	case "validate":
		err = cmdValidate(args[1:], stdout, stderr)
	case "test":
		err = cmdTest(args[1:], stdout, stderr)
	case "coordinator":
		err = cmdCoordinator(args[1:], stdout, stderr)
	case "worker":
		err = cmdWorker(args[1:], stdout, stderr)
	case "standalone":
		err = cmdStandalone(args[1:], stdout, stderr)
	case "cluster":
		err = cmdCluster(args[1:], stdout, stderr)
	case "module":
		err = cmdModule(args[1:], stdout, stderr)
	case "job":
		err = cmdJob(args[1:], stdout, stderr)
	case "savepoint":
		err = cmdSavepoint(args[1:], stdout, stderr)
	case "context":
		err = cmdContext(args[1:], stdout, stderr)
	case "token":
		err = cmdToken(args[1:], stdout, stderr)
	case "audit":
		err = cmdAudit(args[1:], stdout, stderr)
	case "whoami":
		err = cmdWhoAmI(args[1:], stdout, stderr)
	case "certs":
		err = cmdCerts(args[1:], stdout, stderr)
	case "tenant":
		err = cmdTenant(args[1:], stdout, stderr)
	case "new":
		err = cmdNew(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "eddy: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "eddy: %v\n", err)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "eddy: %v\n", err)
	return 1
}

type usageError struct{ error }

// engineFlags are the flags of every command that loads modules.
type engineFlags struct {
	cfg      host.Config
	logLevel string
	dataDir  string
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	e.cfg = host.DefaultConfig()
	e.cfg.CacheDir = defaultCacheDir()
	fs.StringVar(&e.cfg.CacheDir, "cache-dir", e.cfg.CacheDir, "directory of the compiled-module cache (\"\" for none)")
	fs.Uint64Var(&e.cfg.MemoryLimit, "memory-limit", e.cfg.MemoryLimit, "memory limit of each operator instance, in bytes")
	fs.DurationVar(&e.cfg.CallTimeout, "call-timeout", e.cfg.CallTimeout, "deadline for an operator to process one batch")
	fs.StringVar(&e.logLevel, "log-level", "warn", "log level: debug, info, warn, error or off")
	fs.StringVar(&e.dataDir, "data-dir", "", "directory for keyed state (default: a temporary directory removed at exit)")
}

// levelOff is --log-level off: above every level anything logs at.
const levelOff = slog.Level(math.MaxInt32)

func parseLevel(s string) (slog.Level, error) {
	if s == "off" {
		return levelOff, nil
	}
	var lvl slog.Level
	err := lvl.UnmarshalText([]byte(s))
	return lvl, err
}

// level is the --log-level (warn when it does not parse; logger reports
// that).
func (e *engineFlags) level() slog.Level {
	lvl, err := parseLevel(e.logLevel)
	if err != nil {
		return slog.LevelWarn
	}
	return lvl
}

func (e *engineFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	lvl, err := parseLevel(e.logLevel)
	if err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %w", err)}
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), nil
}

func defaultCacheDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "eddy", "wasm")
	}
	return ""
}

// process is what a command runs a job with: the Wasm engine and state
// backends shared by every task of this process.
type process struct {
	job      *dataflow.Job
	engine   *host.Engine
	backends *backends
}

func (p *process) close() {
	_ = p.engine.Close(context.Background())
	p.backends.close()
}

// prepare parses the flags and the spec and plans the job.
func prepare(ctx context.Context, name string, args []string, stdout, stderr io.Writer, extra func(*flag.FlagSet)) (*process, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ef engineFlags
	ef.register(fs)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() != 1 {
		return nil, usageError{fmt.Errorf("%s takes one job spec file (got %d arguments)", name, fs.NArg())}
	}
	log, err := ef.logger(stderr)
	if err != nil {
		return nil, err
	}
	spec, err := jobspec.Load(fs.Arg(0))
	if err != nil {
		return nil, err
	}
	if err := ef.cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	ef.cfg.Logger = log
	engine, err := host.NewEngine(ctx, ef.cfg)
	if err != nil {
		return nil, err
	}
	p := &process{engine: engine, backends: &backends{dir: ef.dataDir}}
	job, err := dataflow.NewJob(ctx, spec, dataflow.Options{
		Connectors:     connectors.Registry{Stdout: stdout},
		Engine:         engine,
		StateBackends:  p.backends.get,
		WindowOperator: window.New,
		Logger:         log,
	})
	if err != nil {
		p.close()
		return nil, err
	}
	p.job = job
	return p, nil
}

func cmdValidate(args []string, stdout, stderr io.Writer) error {
	ctx := context.Background()
	p, err := prepare(ctx, "validate", args, stdout, stderr, nil)
	if err != nil {
		return err
	}
	defer p.close()
	spec := p.job.Spec()
	fmt.Fprintf(stdout, "%s: job %q is valid (%d nodes)\n", spec.File, spec.Name, len(spec.Nodes))
	return nil
}

func printSummary(w io.Writer, s *dataflow.Summary, interrupted bool) {
	state := "finished"
	if interrupted {
		state = "interrupted"
	}
	fmt.Fprintf(w, "job %s %s in %s\n", s.Job, state, s.Elapsed.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tkind\tparallelism\trecords in\trecords out\t")
	for _, n := range s.Nodes {
		in, out := fmt.Sprint(n.In), fmt.Sprint(n.Out)
		if n.Kind == "source" {
			in = "-"
		}
		if n.Kind == "sink" {
			out = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t\n", n.Name, n.Kind, n.Parallelism, in, out)
	}
	tw.Flush()
}

func printJSON(w io.Writer, s *dataflow.Summary) {
	enc := json.NewEncoder(w)
	_ = enc.Encode(struct {
		Job       string                 `json:"job"`
		ElapsedMS int64                  `json:"elapsed_ms"`
		Nodes     []dataflow.NodeSummary `json:"nodes"`
	}{s.Job, s.Elapsed.Milliseconds(), s.Nodes})
}
