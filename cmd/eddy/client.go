package main

// The client commands: module and job, talking to any coordinator over
// gRPC (a follower forwards to the leader).

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

// defaultCoordinator is where client commands go without --coordinator.
const defaultCoordinator = "127.0.0.1:7700"

// clientFlags are the flags every client command has.
type clientFlags struct {
	coordinator string
	tenant      string
	context     string
	timeout     time.Duration
	ca          string
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.coordinator, "coordinator", "", "API address of a coordinator (default: env EDDY_COORDINATOR, else the context's, else "+defaultCoordinator+")")
	fs.StringVar(&c.tenant, "tenant", "", "tenant to act on, for admins (other tokens act on their own tenant)")
	fs.StringVar(&c.context, "context", "", "CLI context to use (default: env EDDY_CONTEXT, else the current one; see eddy context)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "deadline of the call")
	fs.StringVar(&c.ca, "ca", os.Getenv("EDDY_CA"), "PEM file of the CA that signed the coordinator's certificate: dial with TLS (env EDDY_CA)")
}

// target resolves where a call goes, with which token and which CA: the
// flag, the environment (EDDY_COORDINATOR, EDDY_TOKEN, EDDY_CA), the
// context, the default.
func (c *clientFlags) target() (addr, token, ca string, err error) {
	cfg, _, err := loadConfig()
	if err != nil {
		return "", "", "", err
	}
	ctxt, name, err := cfg.context(c.context)
	if err != nil {
		return "", "", "", err
	}
	addr = cmp.Or(c.coordinator, os.Getenv("EDDY_COORDINATOR"))
	token = os.Getenv("EDDY_TOKEN")
	ca = c.ca
	if ctxt != nil {
		addr = cmp.Or(addr, ctxt.Coordinator)
		ca = cmp.Or(ca, ctxt.CA)
		if token == "" {
			if token, err = ctxt.token(name); err != nil {
				return "", "", "", err
			}
		}
	}
	return cmp.Or(addr, defaultCoordinator), token, ca, nil
}

// dial returns a Control client, a context bounded by --timeout for its
// calls, and a function releasing both.
func (c *clientFlags) dial() (eddyv1.ControlClient, context.Context, func(), error) {
	addr, token, ca, err := c.target()
	if err != nil {
		return nil, nil, nil, err
	}
	creds, err := rpc.TLS{CA: ca}.Load(false)
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	opts := creds.DialOptions()
	if creds == nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(plaintextHint))
	}
	if token != "" {
		opts = append(opts, rpc.WithToken(token))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("coordinator %s: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	return eddyv1.NewControlClient(conn), ctx, func() { cancel(); conn.Close() }, nil
}

// plaintextHint adds to an UNAVAILABLE error of a plaintext call what the
// user may have missed: a coordinator that serves TLS closes a plaintext
// connection with nothing more telling than an EOF.
func plaintextHint(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable && len(s.Details()) == 0 {
		// No details: not a NotLeader redirect, which callers follow.
		return status.Errorf(codes.Unavailable, "%s (if the coordinator serves TLS, pass --ca FILE or set EDDY_CA)", s.Message())
	}
	return err
}

// rpcError turns a gRPC error into the one line a user should see.
func rpcError(what string, err error) error {
	if s, ok := status.FromError(err); ok {
		return fmt.Errorf("%s: %s", what, s.Message())
	}
	return fmt.Errorf("%s: %w", what, err)
}

// parseFlags parses a subcommand's flags, which may come before, between
// or after its arguments (`eddy module upload FILE --name NAME`), and
// checks the number of arguments.
func parseFlags(fs *flag.FlagSet, args []string, nargs int, what string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	// Leave the arguments where fs.Arg finds them.
	_ = fs.Parse(append([]string{"--"}, positional...))
	if nargs >= 0 && fs.NArg() != nargs {
		return usageError{fmt.Errorf("%s (got %d arguments)", what, fs.NArg())}
	}
	return nil
}

const moduleUsage = `usage:
  eddy module upload [flags] FILE.wasm --name NAME   validate and store a module; prints NAME@VERSION
  eddy module list [flags] [NAME]                    list modules (all versions of NAME)
  eddy module get [flags] NAME[@VERSION] [-o FILE]   download a module (the latest version without @)
`

func cmdModule(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("module needs a subcommand\n" + moduleUsage)}
	}
	fs := flag.NewFlagSet("module "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	switch args[0] {
	case "upload":
		var name string
		fs.StringVar(&name, "name", "", "module name (default: the file name without .wasm)")
		if err := parseFlags(fs, args[1:], 1, "module upload takes one .wasm file"); err != nil {
			return err
		}
		wasm, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return err
		}
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(fs.Arg(0)), ".wasm")
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.UploadModule(ctx, &eddyv1.UploadModuleRequest{Tenant: cf.tenant, Name: name, Wasm: wasm})
		if err != nil {
			return rpcError("upload "+fs.Arg(0), err)
		}
		m := resp.GetModule()
		note := ""
		if resp.GetAlreadyExists() {
			note = " (unchanged: same bytes as this version)"
		}
		fmt.Fprintf(stdout, "%s@%d sha256:%s %d bytes%s\n", m.GetName(), m.GetVersion(), m.GetSha256(), m.GetSize(), note)
		return nil
	case "list":
		if err := parseFlags(fs, args[1:], -1, ""); err != nil {
			return err
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.ListModules(ctx, &eddyv1.ListModulesRequest{Tenant: cf.tenant, Name: fs.Arg(0)})
		if err != nil {
			return rpcError("list modules", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVERSION\tSIZE\tSHA256\tCREATED")
		for _, m := range resp.GetModules() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.12s\t%s\n", m.GetName(), m.GetVersion(), m.GetSize(), m.GetSha256(),
				time.UnixMilli(m.GetCreatedUnixMs()).UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	case "get":
		var out string
		fs.StringVar(&out, "o", "", "write the module to this file (default NAME@VERSION.wasm)")
		if err := parseFlags(fs, args[1:], 1, "module get takes one NAME[@VERSION]"); err != nil {
			return err
		}
		name, version, err := parseRef(fs.Arg(0))
		if err != nil {
			return usageError{err}
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.GetModule(ctx, &eddyv1.GetModuleRequest{Tenant: cf.tenant, Name: name, Version: version})
		if err != nil {
			return rpcError("get module "+fs.Arg(0), err)
		}
		m := resp.GetModule()
		if out == "" {
			out = fmt.Sprintf("%s@%d.wasm", m.GetName(), m.GetVersion())
		}
		if err := os.WriteFile(out, resp.GetWasm(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s@%d → %s (%d bytes)\n", m.GetName(), m.GetVersion(), out, len(resp.GetWasm()))
		return nil
	}
	return usageError{fmt.Errorf("unknown module subcommand %q\n%s", args[0], moduleUsage)}
}

// parseRef splits NAME[@VERSION]; version 0 means the latest.
func parseRef(ref string) (string, uint32, error) {
	name, v, ok := strings.Cut(ref, "@")
	if !ok {
		return name, 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("module reference %q: the version after @ must be a positive number", ref)
	}
	return name, uint32(n), nil
}

const jobUsage = `usage:
  eddy job submit [flags] JOB.yaml   submit a job; prints its id (--from-savepoint PATH: start from a savepoint)
  eddy job list [flags]              list jobs
  eddy job status [flags] ID         a job's state, tasks, checkpoints, Wasm nodes and hot swaps
                                     (--watch [--interval D]: redrawn until the job ends; exit 1 unless it finished)
  eddy job swap [flags] ID --node NAME [--module NAME@VERSION] [--config JSON] [--allow-dropped-state]
                                     replace one Wasm node's module or configuration in place, keeping its
                                     state; waits for the outcome (--timeout, default 5m)
  eddy job upgrade [flags] ID JOB.yaml
                                     apply a new spec of the job: one swap per changed module or
                                     configuration, or, for a parallelism change, stop with a savepoint
                                     and resubmit (a new job id); refuses a topology change (exit 2)
                                     (--allow-dropped-state as for swap; --timeout, default 10m)
  eddy job cancel [flags] ID         cancel a job
  eddy job logs [flags] ID           its tasks' log lines: TIME TASK LEVEL [stream] message
                                     (--follow: until the job ends; --since N: after the job's N-th line)
`

func cmdJob(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("job needs a subcommand\n" + jobUsage)}
	}
	fs := flag.NewFlagSet("job "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var c eddyv1.ControlClient
	connect := func(nargs int, what string) (context.Context, func(), error) {
		if err := parseFlags(fs, args[1:], nargs, what); err != nil {
			return nil, nil, err
		}
		client, ctx, done, err := cf.dial()
		if err != nil {
			return nil, nil, err
		}
		c = client
		return ctx, done, nil
	}
	switch args[0] {
	case "submit":
		var fromSavepoint string
		fs.StringVar(&fromSavepoint, "from-savepoint", "", "start from this savepoint (the path eddy savepoint create printed)")
		ctx, done, err := connect(1, "job submit takes one job spec file")
		if err != nil {
			return err
		}
		defer done()
		spec, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return err
		}
		resp, err := c.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: cf.tenant, SpecYaml: spec,
			SpecName: filepath.Base(fs.Arg(0)), FromSavepoint: fromSavepoint})
		if err != nil {
			return rpcError("submit "+fs.Arg(0), err)
		}
		fmt.Fprintln(stdout, resp.GetJobId())
		return nil
	case "list":
		ctx, done, err := connect(0, "job list takes no arguments")
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.ListJobs(ctx, &eddyv1.ListJobsRequest{Tenant: cf.tenant})
		if err != nil {
			return rpcError("list jobs", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATE\tATTEMPT\tMESSAGE")
		for _, j := range resp.GetJobs() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", j.GetJobId(), j.GetName(), jobState(j.GetState()), j.GetAttempt(), j.GetMessage())
		}
		return tw.Flush()
	case "status":
		var watch bool
		var interval time.Duration
		fs.BoolVar(&watch, "watch", false, "redraw the status every --interval until the job ends (or Ctrl-C); exit 1 unless it finished")
		fs.DurationVar(&interval, "interval", 2*time.Second, "period of --watch")
		ctx, done, err := connect(1, "job status takes one job id")
		if err != nil {
			return err
		}
		defer done()
		if watch {
			if interval <= 0 {
				return usageError{fmt.Errorf("--interval %s: want > 0", interval)}
			}
			return watchStatus(c, cf, fs.Arg(0), interval, stdout)
		}
		resp, err := c.JobStatus(ctx, &eddyv1.JobStatusRequest{Tenant: cf.tenant, JobId: fs.Arg(0)})
		if err != nil {
			return rpcError("job "+fs.Arg(0), err)
		}
		printStatus(stdout, resp)
		return nil
	case "logs":
		var follow bool
		var since uint64
		fs.BoolVar(&follow, "follow", false, "print lines as they come, until the job ends or Ctrl-C")
		fs.Uint64Var(&since, "since", 0, "print only the lines after the job's N-th (as the coordinator numbers them)")
		_, done, err := connect(1, "job logs takes one job id")
		if err != nil {
			return err
		}
		defer done()
		return jobLogs(c, cf, fs.Arg(0), since, follow, stdout)
	case "swap":
		return jobSwap(fs, &cf, args[1:], stdout)
	case "upgrade":
		return jobUpgrade(fs, &cf, args[1:], stdout)
	case "cancel":
		ctx, done, err := connect(1, "job cancel takes one job id")
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.CancelJob(ctx, &eddyv1.CancelJobRequest{Tenant: cf.tenant, JobId: fs.Arg(0)})
		if err != nil {
			return rpcError("cancel "+fs.Arg(0), err)
		}
		fmt.Fprintf(stdout, "%s %s\n", fs.Arg(0), jobState(resp.GetState()))
		return nil
	}
	return usageError{fmt.Errorf("unknown job subcommand %q\n%s", args[0], jobUsage)}
}

// jobState is a job state as users read it: "RUNNING", "WAITING_FOR_SLOTS".
func jobState(s eddyv1.JobState) string {
	return strings.TrimPrefix(s.String(), "JOB_STATE_")
}

// taskState is a task state as users read it; "-" for a task that has
// none yet (its job waits for slots).
func taskState(s eddyv1.TaskState) string {
	if s == eddyv1.TaskState_TASK_STATE_UNSPECIFIED {
		return "-"
	}
	return strings.TrimPrefix(s.String(), "TASK_STATE_")
}

func printStatus(w io.Writer, resp *eddyv1.JobStatusResponse) {
	j := resp.GetJob()
	fmt.Fprintf(w, "job %s (%s): %s, attempt %d\n", j.GetJobId(), j.GetName(), jobState(j.GetState()), j.GetAttempt())
	if m := j.GetMessage(); m != "" {
		fmt.Fprintf(w, "  %s\n", m)
	}
	if len(resp.GetTasks()) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSTATE\tWORKER\tRECORDS IN\tRECORDS OUT\tBACKPRESSURE\tPENDING\tERROR")
		for _, t := range resp.GetTasks() {
			// A task not placed yet, or whose worker has not reported it
			// yet (deploying, restarting), has no metrics.
			in, out, backpressure, pending := "-", "-", "-", "-"
			if m := t.GetMetrics(); m != nil {
				in, out = strconv.FormatUint(m.GetRecordsIn(), 10), strconv.FormatUint(m.GetRecordsOut(), 10)
				backpressure = fmt.Sprintf("%.0f%%", 100*m.GetBackpressureRatio())
				if m.PendingRecords != nil { // else no source, or one that cannot tell
					pending = strconv.FormatInt(m.GetPendingRecords(), 10)
				}
			}
			worker := cmp.Or(t.GetWorkerId(), "-")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.GetTaskId(), taskState(t.GetState()), worker,
				in, out, backpressure, pending, t.GetError())
		}
		tw.Flush()
	}
	if len(resp.GetCheckpoints()) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECKPOINT\tKIND\tSTATE\tDURATION\tFULL\tINCREMENTAL\tPATH\tERROR")
		for _, c := range resp.GetCheckpoints() {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%dms\t%d\t%d\t%s\t%s\n", c.GetCheckpointId(), strings.TrimPrefix(c.GetKind().String(), "CHECKPOINT_KIND_"),
				strings.TrimPrefix(c.GetState().String(), "CHECKPOINT_STATE_"), c.GetDurationMs(), c.GetFullSizeBytes(), c.GetIncrementalSizeBytes(),
				c.GetPath(), c.GetError())
		}
		tw.Flush()
	}
	printNodes(w, resp.GetNodes())
	printSwaps(w, resp.GetSwaps())
}

const savepointUsage = `usage:
  eddy savepoint create [flags] JOB   take a savepoint of a running job and print its path
                                      (--stop: cancel the job once it is taken)
`

func cmdSavepoint(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return usageError{errors.New("savepoint needs a subcommand\n" + savepointUsage)}
	}
	fs := flag.NewFlagSet("savepoint create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	// A savepoint of a large state takes a while: a longer default deadline.
	setDefaultTimeout(fs, 10*time.Minute)
	var stop bool
	fs.BoolVar(&stop, "stop", false, "cancel the job once the savepoint is taken")
	if err := parseFlags(fs, args[1:], 1, "savepoint create takes one job id"); err != nil {
		return err
	}
	c, ctx, done, err := cf.dial()
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.TriggerSavepoint(ctx, &eddyv1.TriggerSavepointRequest{Tenant: cf.tenant, JobId: fs.Arg(0), Stop: stop})
	if err != nil {
		return rpcError("savepoint of "+fs.Arg(0), err)
	}
	fmt.Fprintln(stdout, resp.GetPath())
	return nil
}

func cmdCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "info" {
		return usageError{errors.New("usage: eddy cluster info [flags]   the coordinators (and which leads) and the workers")}
	}
	fs := flag.NewFlagSet("cluster info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args[1:], 0, "cluster info takes no arguments"); err != nil {
		return err
	}
	c, ctx, done, err := cf.dial()
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.ClusterInfo(ctx, &eddyv1.ClusterInfoRequest{})
	if err != nil {
		return rpcError("cluster info", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COORDINATOR\tROLE\tAPI\tRAFT\tVOTER")
	for _, m := range resp.GetCoordinators() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", m.GetNodeId(), strings.TrimPrefix(m.GetRole().String(), "COORDINATOR_ROLE_"),
			m.GetApiAddress(), m.GetRaftAddress(), m.GetVoter())
	}
	fmt.Fprintln(tw, "\nWORKER\tSTATE\tDATA\tSLOTS USED\tSLOTS")
	for _, w := range resp.GetWorkers() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", w.GetWorkerId(), strings.TrimPrefix(w.GetState().String(), "WORKER_STATE_"),
			w.GetDataAddress(), w.GetSlotsUsed(), w.GetSlotsTotal())
	}
	return tw.Flush()
}
