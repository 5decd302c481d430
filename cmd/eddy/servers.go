package main

// The server modes: coordinator, worker, and standalone (one of each in
// this process, the embedded default that `eddy run` also uses).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dashboard"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/internal/metricsrv"
	"github.com/eddy-stream/eddy/scheduler/coordinator"
	"github.com/eddy-stream/eddy/scheduler/worker"
)

// coordinatorFlags fill a coordinator.Config.
type coordinatorFlags struct {
	cfg         coordinator.Config
	dataDir     string
	blobs       string
	checkpoints string
	restarts    int
	restart     string
	delay       time.Duration
	// Kubernetes: see statefulset.go.
	statefulService string
	raftAdvertise   string
}

func (c *coordinatorFlags) register(fs *flag.FlagSet, standalone bool) {
	c.cfg = coordinator.DefaultConfig()
	fs.StringVar(&c.cfg.NodeID, "id", "c1", "this coordinator's name in the Raft group")
	fs.StringVar(&c.cfg.APIAddr, "api", c.cfg.APIAddr, "gRPC listen address for clients and workers (port 0: one the kernel picks; printed once serving)")
	fs.StringVar(&c.cfg.APIAdvertiseAddr, "advertise", "", "API address others dial, if not --api")
	fs.StringVar(&c.blobs, "blobs", "", "directory of the module store, shared by every coordinator (default DATA-DIR/blobs)")
	fs.StringVar(&c.checkpoints, "checkpoints", "", "checkpoint storage of jobs whose spec names none, file:///dir or s3://bucket/prefix, reached by every coordinator and worker (default file://DATA-DIR/checkpoints)")
	fs.DurationVar(&c.cfg.HeartbeatInterval, "heartbeat-interval", c.cfg.HeartbeatInterval, "how often workers heartbeat")
	fs.DurationVar(&c.cfg.HeartbeatTimeout, "heartbeat-timeout", c.cfg.HeartbeatTimeout, "after this long without a heartbeat a worker is lost and its jobs restart")
	fs.StringVar(&c.restart, "restart", string(c.cfg.Restart.Kind), "restart strategy of failed jobs: exponential, fixed or none")
	fs.DurationVar(&c.delay, "restart-delay", c.cfg.Restart.Delay, "delay before a restart (the first, for exponential)")
	fs.IntVar(&c.restarts, "restarts", c.cfg.Restart.MaxAttempts, "restarts of a job before it fails")
	if !standalone {
		fs.StringVar(&c.cfg.Raft.BindAddr, "raft", c.cfg.Raft.BindAddr, "Raft listen address (port 0 as for --api; a member that restarts needs a fixed one)")
		fs.BoolVar(&c.cfg.Raft.Bootstrap, "bootstrap", false, "form a new group with this member (the first coordinator)")
		fs.StringVar(&c.cfg.Join, "join", "", "API address of a member of an existing group to join")
		fs.DurationVar(&c.cfg.JoinTimeout, "join-timeout", c.cfg.JoinTimeout, "how long to keep trying to join before giving up")
		fs.StringVar(&c.raftAdvertise, "raft-advertise", "", "Raft address the other members dial, if not --raft; a host name is resolved once at start (on Kubernetes: a Service of this pod, whose IP outlives the pod's)")
		fs.StringVar(&c.statefulService, "statefulset-service", "", "headless Service of a StatefulSet of coordinators: the pod's host name SET-N gives --id cN, N=0 --bootstrap, the others --join SET-0.SERVICE, and --advertise SET-N.SERVICE (with --api's port)")
	}
}

// build checks the flags and makes the coordinator.
func (c *coordinatorFlags) build(engine *host.Engine, log *slog.Logger) (*coordinator.Coordinator, error) {
	if c.dataDir == "" {
		return nil, usageError{errors.New("--data-dir is required")}
	}
	c.cfg.Raft.DataDir = filepath.Join(c.dataDir, "raft")
	c.cfg.Restart.Kind = coordinator.RestartKind(c.restart)
	c.cfg.Restart.Delay = c.delay
	c.cfg.Restart.MaxAttempts = c.restarts
	if c.cfg.Restart.MaxDelay < c.delay {
		c.cfg.Restart.MaxDelay = c.delay
	}
	c.cfg.Logger = log
	if c.blobs == "" {
		c.blobs = filepath.Join(c.dataDir, "blobs")
	}
	// The member that forms a new cluster makes its first admin token
	// (EDDY_BOOTSTRAP_TOKEN, or a random one) and writes it here; a
	// joining member proves itself with an admin token (EDDY_TOKEN).
	if c.cfg.Raft.Bootstrap {
		c.cfg.AdminTokenFile = filepath.Join(c.dataDir, coordinator.AdminTokenFileName)
		c.cfg.BootstrapToken = os.Getenv("EDDY_BOOTSTRAP_TOKEN")
	}
	c.cfg.JoinToken = os.Getenv("EDDY_TOKEN")
	c.cfg.CheckpointStorage = c.checkpoints
	if c.checkpoints == "" {
		dir, err := filepath.Abs(filepath.Join(c.dataDir, "checkpoints"))
		if err != nil {
			return nil, err
		}
		c.cfg.CheckpointStorage = "file://" + filepath.ToSlash(dir)
	}
	if err := c.cfg.Validate(); err != nil {
		return nil, usageError{err}
	}
	return coordinator.New(c.cfg, coordinator.Deps{
		Store:     coordinator.DirStore{Dir: c.blobs},
		Validator: validator(engine),
		Planner:   planTasks,
		NodeTasks: nodeTasks,
		Graph:     jobGraph,
	})
}

// validator compiles and validates an uploaded module with the host, as a
// worker will, so a module that would not run is refused at upload.
func validator(engine *host.Engine) func(ctx context.Context, name string, wasm []byte) error {
	return func(ctx context.Context, name string, wasm []byte) error {
		m, err := engine.Compile(ctx, name, wasm)
		if err != nil {
			return err
		}
		return m.Close(ctx)
	}
}

func planTasks(specYAML []byte) ([]string, error) {
	spec, err := jobspec.Parse(specYAML, "")
	if err != nil {
		return nil, err
	}
	tasks, err := dataflow.PlanTasks(spec)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids, nil
}

// nodeTasks lists the tasks whose chain runs node: the ones that prepare a
// hot swap of it.
func nodeTasks(specYAML []byte, node string) ([]string, error) {
	spec, err := jobspec.Parse(specYAML, "")
	if err != nil {
		return nil, err
	}
	tasks, err := dataflow.PlanTasks(spec)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range tasks {
		if slices.Contains(t.Chain, node) {
			ids = append(ids, t.ID)
		}
	}
	return ids, nil
}

// workerFlags fill a worker.Config.
type workerFlags struct {
	cfg          worker.Config
	coordinators string
}

func (w *workerFlags) register(fs *flag.FlagSet, standalone bool) {
	w.cfg = worker.DefaultConfig()
	fs.IntVar(&w.cfg.Slots, "slots", w.cfg.Slots, "tasks this worker runs at once")
	fs.StringVar(&w.cfg.DataAddr, "data", w.cfg.DataAddr, "listen address of the worker's data exchange")
	if !standalone {
		fs.StringVar(&w.cfg.ID, "id", "", "this worker's name (default: from its data address)")
		fs.StringVar(&w.coordinators, "coordinator", defaultCoordinator, "API addresses of coordinators, comma-separated")
		fs.StringVar(&w.cfg.AdvertiseAddr, "advertise", "", "data address other workers dial, if not --data")
	}
}

// server is what a server command runs with: engine, state backends, and
// its coordinator and worker (either may be nil).
type server struct {
	engine   *host.Engine
	backends *backends
	coord    *coordinator.Coordinator
	worker   *worker.Worker
	log      *slog.Logger
	metrics  *metricsrv.Server // --metrics, when set
}

func (s *server) stop() {
	if s.metrics != nil {
		_ = s.metrics.Close()
	}
	if s.worker != nil {
		s.worker.Stop()
	}
	if s.coord != nil {
		s.coord.Stop()
	}
	if s.engine != nil {
		_ = s.engine.Close(context.Background())
	}
	if s.backends != nil {
		s.backends.close()
	}
}

// startWorker starts a worker of this process.
func (s *server) startWorker(ctx context.Context, wf *workerFlags, coordinators []string, stdout io.Writer) error {
	wf.cfg.Coordinators = coordinators
	wf.cfg.Logger = s.log
	wf.cfg.Job = dataflow.Options{
		Connectors:     connectors.Registry{Stdout: stdout},
		Engine:         s.engine,
		StateBackends:  s.backends.get,
		WindowOperator: window.New,
	}
	w, err := worker.New(wf.cfg)
	if err != nil {
		return usageError{err}
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	s.worker = w
	return nil
}

// serverFlags parses a server command's flags.
func serverFlags(name string, args []string, stderr io.Writer, register func(fs *flag.FlagSet)) (*engineFlags, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ef engineFlags
	ef.register(fs)
	register(fs)
	if err := parseFlags(fs, args, 0, name+" takes no arguments"); err != nil {
		return nil, err
	}
	return &ef, nil
}

func newServer(ctx context.Context, ef *engineFlags, stderr io.Writer) (*server, error) {
	log, err := ef.logger(stderr)
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
	return &server{engine: engine, backends: &backends{dir: ef.dataDir}, log: log}, nil
}

// waitSignal blocks until SIGINT or SIGTERM.
func waitSignal() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
}

func cmdCoordinator(args []string, stdout, stderr io.Writer) error {
	var cf coordinatorFlags
	var tf tlsFlags
	var httpAddr string
	var parsed *flag.FlagSet
	var mf metricsFlags
	ef, err := serverFlags("coordinator", args, stderr, func(fs *flag.FlagSet) {
		cf.register(fs, false)
		tf.register(fs)
		fs.StringVar(&httpAddr, "http", "", httpFlagUsage)
		mf.register(fs)
		parsed = fs
	})
	if err != nil {
		return err
	}
	if err := cf.applyStatefulSet(parsed); err != nil {
		return err
	}
	if cf.raftAdvertise != "" {
		if cf.cfg.Raft.AdvertiseAddr, err = resolveRaftAdvertise(context.Background(), cf.raftAdvertise, lookupIP); err != nil {
			return err
		}
	}
	if cf.cfg.TLS, err = tf.load(); err != nil {
		return err
	}
	if err := tf.checkListen(cf.cfg.TLS, "--api", cf.cfg.APIAddr, "--raft", cf.cfg.Raft.BindAddr); err != nil {
		return err
	}
	if err := checkHTTPListen(&tf, cf.cfg.TLS, httpAddr); err != nil {
		return err
	}
	if err := mf.check(&tf, cf.cfg.TLS); err != nil {
		return err
	}
	cf.dataDir = ef.dataDir
	ctx := context.Background()
	s, err := newServer(ctx, ef, stderr)
	if err != nil {
		return err
	}
	defer s.stop()
	if s.coord, err = cf.build(s.engine, s.log); err != nil {
		return err
	}
	if err := s.coord.Start(ctx); err != nil {
		return err
	}
	// The addresses bound, also for port 0: what a script (or the tests)
	// reads to reach a coordinator started on ports the kernel picked.
	fmt.Fprintf(stdout, "coordinator %s serving on %s (raft %s)\n", cf.cfg.NodeID, s.coord.Addr(), s.coord.RaftAddr())
	hs, err := startHTTP(ctx, httpAddr, &tf, cf.cfg.TLS, s.coord, dashboard.Handler(), s.log, stdout)
	if err != nil {
		return err
	}
	defer hs.close()
	reg := newRegistry()
	reg.MustRegister(s.coord.Collector())
	if s.metrics, err = mf.serve("coordinator", metricsrv.Options{Gatherer: reg, Authorize: s.coord.AuthorizeMetrics, Ready: s.coord.Ready}, cf.cfg.TLS, stdout); err != nil {
		return err
	}
	if cf.cfg.Raft.Bootstrap {
		printAdminToken(ctx, s.coord, stdout, stderr)
	}
	waitSignal()
	return nil
}

// adminTokenWait bounds the wait for a new cluster's first admin token.
const adminTokenWait = 30 * time.Second

// printAdminToken says where the bootstrap admin token is (never the
// token itself), and whether there is one.
func printAdminToken(ctx context.Context, c *coordinator.Coordinator, stdout, stderr io.Writer) bool {
	ctx, cancel := context.WithTimeout(ctx, adminTokenWait)
	defer cancel()
	if _, err := c.AdminToken(ctx); err != nil {
		fmt.Fprintf(stderr, "eddy: %v\n", err)
		return false
	}
	fmt.Fprintf(stdout, "admin token in %s (export EDDY_TOKEN=$(cat %s), or eddy context set NAME --coordinator %s --token-file %s)\n",
		c.AdminTokenFile(), c.AdminTokenFile(), c.Addr(), c.AdminTokenFile())
	return true
}

func cmdWorker(args []string, stdout, stderr io.Writer) error {
	var wf workerFlags
	var tf tlsFlags
	var mf metricsFlags
	ef, err := serverFlags("worker", args, stderr, func(fs *flag.FlagSet) {
		wf.register(fs, false)
		tf.register(fs)
		mf.register(fs)
	})
	if err != nil {
		return err
	}
	if wf.cfg.TLS, err = tf.load(); err != nil {
		return err
	}
	if err := tf.checkListen(wf.cfg.TLS, "--data", wf.cfg.DataAddr); err != nil {
		return err
	}
	if err := mf.check(&tf, wf.cfg.TLS); err != nil {
		return err
	}
	ctx := context.Background()
	s, err := newServer(ctx, ef, stderr)
	if err != nil {
		return err
	}
	defer s.stop()
	// The listener serves while the worker registers: /readyz says 503
	// until it has. It is a cluster-internal port: no token (RATIONALE).
	reg := newRegistry()
	reg.MustRegister(s.engine.Collector())
	var ready workerReady
	if s.metrics, err = mf.serve("worker", metricsrv.Options{Gatherer: reg, Ready: ready.ready}, wf.cfg.TLS, stdout); err != nil {
		return err
	}
	if err := s.startWorker(ctx, &wf, strings.Split(wf.coordinators, ","), stdout); err != nil {
		return err
	}
	reg.MustRegister(s.worker.Collector())
	ready.w.Store(s.worker)
	fmt.Fprintf(stdout, "worker %s with %d slots, data exchange on %s\n", s.worker.ID(), wf.cfg.Slots, s.worker.Addr())
	waitSignal()
	return nil
}

// startStandalone starts a single-member coordinator and one worker in
// this process: the same code as a cluster, wired together.
func startStandalone(ctx context.Context, ef *engineFlags, cf *coordinatorFlags, wf *workerFlags, stdout, stderr io.Writer) (*server, error) {
	cf.dataDir = ef.dataDir
	cf.cfg.Raft.Bootstrap = true
	cf.cfg.Raft.BindAddr = "127.0.0.1:0"
	// A group of one has no peer to wait for: it may elect itself at once
	// rather than after the cluster's network-sized timeouts.
	cf.cfg.Raft.HeartbeatTimeout = 100 * time.Millisecond
	cf.cfg.Raft.ElectionTimeout = 100 * time.Millisecond
	cf.cfg.Raft.LeaderLeaseTimeout = 100 * time.Millisecond
	// The election a group of one holds at every start is logged by Raft
	// as a warning; it is not one here.
	if lvl := ef.level(); lvl >= slog.LevelWarn {
		cf.cfg.Raft.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: max(lvl, slog.LevelError)}))
	}
	s, err := newServer(ctx, ef, stderr)
	if err != nil {
		return nil, err
	}
	if s.coord, err = cf.build(s.engine, s.log); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.coord.Start(ctx); err != nil {
		s.stop()
		return nil, err
	}
	if _, _, err := s.coord.WaitLeader(ctx); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.startWorker(ctx, wf, []string{s.coord.Addr()}, stdout); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func cmdStandalone(args []string, stdout, stderr io.Writer) error {
	var cf coordinatorFlags
	var wf workerFlags
	var cliContext string
	var tf tlsFlags
	var httpAddr string
	var mf metricsFlags
	ef, err := serverFlags("standalone", args, stderr, func(fs *flag.FlagSet) {
		cf.register(fs, true)
		wf.register(fs, true)
		tf.register(fs)
		fs.StringVar(&httpAddr, "http", "", httpFlagUsage)
		mf.register(fs)
		def := "local"
		if v, ok := os.LookupEnv("EDDY_CLI_CONTEXT"); ok {
			def = v
		}
		fs.StringVar(&cliContext, "cli-context", def, "CLI context to save with this standalone's address and admin token file (empty: none; env EDDY_CLI_CONTEXT)")
	})
	if err != nil {
		return err
	}
	if cf.cfg.TLS, err = tf.load(); err != nil {
		return err
	}
	wf.cfg.TLS = cf.cfg.TLS
	if err := tf.checkListen(cf.cfg.TLS, "--api", cf.cfg.APIAddr, "--data", wf.cfg.DataAddr); err != nil {
		return err
	}
	if err := checkHTTPListen(&tf, cf.cfg.TLS, httpAddr); err != nil {
		return err
	}
	if err := mf.check(&tf, cf.cfg.TLS); err != nil {
		return err
	}
	if ef.dataDir == "" {
		return usageError{errors.New("--data-dir is required")}
	}
	s, err := startStandalone(context.Background(), ef, &cf, &wf, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Fprintf(stdout, "standalone: coordinator on %s, worker with %d slots, data exchange on %s\n", s.coord.Addr(), wf.cfg.Slots, s.worker.Addr())
	hs, err := startHTTP(context.Background(), httpAddr, &tf, cf.cfg.TLS, s.coord, dashboard.Handler(), s.log, stdout)
	if err != nil {
		return err
	}
	defer hs.close()
	reg := newRegistry()
	reg.MustRegister(s.engine.Collector(), s.coord.Collector(), s.worker.Collector())
	ready := func() error { return errors.Join(s.coord.Ready(), s.worker.Ready()) }
	if s.metrics, err = mf.serve("standalone", metricsrv.Options{Gatherer: reg, Authorize: s.coord.AuthorizeMetrics, Ready: ready}, cf.cfg.TLS, stdout); err != nil {
		return err
	}
	if printAdminToken(context.Background(), s.coord, stdout, stderr) && cliContext != "" {
		abs, _ := filepath.Abs(cf.cfg.AdminTokenFile)
		if path, err := registerLocalContext(cliContext, s.coord.Addr(), abs, tf.tls.CA); err != nil {
			fmt.Fprintf(stderr, "eddy: CLI context %s not saved: %v\n", cliContext, err)
		} else {
			fmt.Fprintf(stdout, "CLI context %s: %s (in %s)\n", cliContext, s.coord.Addr(), path)
		}
	}
	waitSignal()
	return nil
}
