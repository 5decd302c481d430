package main

// eddy run: a job on an embedded standalone cluster (one coordinator, one
// worker, in this process), the same code as a real cluster. Modules named
// by path are uploaded to its registry first.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"gopkg.in/yaml.v3"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var ef engineFlags
	ef.register(fs)
	var cf coordinatorFlags
	cf.register(fs, true)
	var wf workerFlags
	wf.register(fs, true)
	var asJSON bool
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	progress := progressAuto
	fs.Var(&progress, "progress", "progress on stderr: auto (a line redrawn on a terminal, else a line every --progress-interval once the job ran that long), always (auto, and a last line at the end), never")
	var progressEvery time.Duration
	fs.DurationVar(&progressEvery, "progress-interval", 5*time.Second, "period of the progress lines when stderr is not a terminal")
	// A job run from the command line fails at its first failure unless
	// asked otherwise.
	if err := fs.Set("restart", "none"); err != nil {
		return err
	}
	if err := fs.Set("restarts", "0"); err != nil {
		return err
	}
	if err := fs.Set("slots", "0"); err != nil {
		return err
	}
	if err := fs.Set("api", "127.0.0.1:0"); err != nil {
		return err
	}
	// The run reports how the job ended, its summary or its error in one
	// line; the embedded cluster's logs of it (a failed task, the job
	// failed) would only say the same again.
	if f := fs.Lookup("log-level"); f != nil {
		_ = f.Value.Set("off")
		f.DefValue = f.Value.String()
	}
	if err := parseFlags(fs, args, 1, "run takes one job spec file"); err != nil {
		return err
	}
	if progressEvery <= 0 {
		return usageError{fmt.Errorf("--progress-interval %s: want > 0", progressEvery)}
	}
	spec, err := jobspec.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	tasks, err := dataflow.PlanTasks(spec)
	if err != nil {
		return err
	}
	if wf.cfg.Slots == 0 {
		wf.cfg.Slots = len(tasks) // every task at once, as a local run
	}
	if ef.dataDir == "" {
		dir, release, err := newRunDir()
		if err != nil {
			return err
		}
		defer release()
		ef.dataDir = dir
	}
	// Quiet unless asked: the coordinator and worker log their life cycle
	// at info.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := startStandalone(context.Background(), &ef, &cf, &wf, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.stop()

	// In-process credentials: the admin token the embedded coordinator
	// made for the cluster it formed.
	token, err := s.coord.AdminToken(ctx)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(s.coord.Addr(), append(rpc.DialOptions(), rpc.WithToken(token))...)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := eddyv1.NewControlClient(conn)
	text, err := submittable(ctx, client, spec, fs.Arg(0))
	if err != nil {
		return err
	}
	start := time.Now()
	sub, err := client.SubmitJob(ctx, &eddyv1.SubmitJobRequest{SpecYaml: text, SpecName: filepath.Base(fs.Arg(0))})
	if err != nil {
		return rpcError("submit "+fs.Arg(0), err)
	}
	id := sub.GetJobId()
	var lp *liveProgress
	if progress != progressNever {
		p := newProgressPrinter(stderr, isTerminal(stderr), progressEvery, start)
		lp = startProgress(p, progress == progressAlways, func() []dataflow.NodeSummary { return s.worker.NodeStats(id) })
		defer lp.stop()
	}
	final, interrupted, err := waitJob(ctx, client, id)
	if lp != nil {
		lp.stop() // before the summary or the error: the live line goes first
	}
	if err != nil {
		return err
	}
	if !interrupted && final.GetState() != eddyv1.JobState_JOB_STATE_FINISHED {
		// No summary: the error is all a failed run prints.
		return fmt.Errorf("job %s %s: %s", spec.Name, strings.ToLower(jobState(final.GetState())), final.GetMessage())
	}
	sum := &dataflow.Summary{Job: spec.Name, Nodes: s.worker.NodeStats(id), Elapsed: time.Since(start)}
	if sum.Nodes == nil {
		sum.Nodes = []dataflow.NodeSummary{}
	}
	if asJSON {
		printJSON(stdout, sum)
	} else {
		printSummary(stderr, sum, interrupted)
	}
	return nil
}

// waitJob polls the job until it ends. On an interrupt it cancels the job
// and waits for that.
func waitJob(ctx context.Context, client eddyv1.ControlClient, id string) (*eddyv1.JobSummary, bool, error) {
	interrupted := false
	for {
		if ctx.Err() != nil && !interrupted {
			interrupted = true
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := client.CancelJob(cctx, &eddyv1.CancelJobRequest{JobId: id})
			cancel()
			if err != nil {
				return nil, true, rpcError("cancel "+id, err)
			}
		}
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := client.JobStatus(cctx, &eddyv1.JobStatusRequest{JobId: id})
		cancel()
		if err != nil {
			return nil, interrupted, rpcError("job "+id, err)
		}
		if j := st.GetJob(); terminalState(j.GetState()) {
			return j, interrupted, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// moduleName derives a registry name from a module file's name.
func moduleName(path string) string {
	base := strings.ToLower(strings.TrimSuffix(filepath.Base(path), ".wasm"))
	base = regexp.MustCompile(`[^a-z0-9._-]+`).ReplaceAllString(base, "-")
	base = strings.TrimLeft(base, "._-")
	if base == "" {
		base = "module"
	}
	return base
}

// submittable rewrites a local spec for the embedded cluster: each module
// named by path is uploaded and named by its registry reference instead,
// and relative file paths are made absolute (they are relative to the
// spec's directory, which the worker does not know).
func submittable(ctx context.Context, client eddyv1.ControlClient, spec *jobspec.Spec, file string) ([]byte, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	refs := map[string]string{} // module as written → name@version
	for i := range spec.Nodes {
		for _, w := range spec.Nodes[i].Modules() {
			if _, done := refs[w.Module]; done {
				continue
			}
			path := spec.Resolve(w.Module)
			wasm, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("node %q: module %s: %w", spec.Nodes[i].Name, w.Module, err)
			}
			resp, err := client.UploadModule(ctx, &eddyv1.UploadModuleRequest{Name: moduleName(path), Wasm: wasm})
			if err != nil {
				return nil, rpcError(fmt.Sprintf("node %q: module %s", spec.Nodes[i].Name, w.Module), err)
			}
			refs[w.Module] = fmt.Sprintf("%s@%d", resp.GetModule().GetName(), resp.GetModule().GetVersion())
		}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Kind == yaml.ScalarNode {
					switch k.Value {
					case "module":
						if r, ok := refs[v.Value]; ok {
							v.Value = r
						}
					case "path":
						v.Value = spec.Resolve(v.Value)
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, errors.New("rewrite the spec: " + err.Error())
	}
	return out, nil
}
