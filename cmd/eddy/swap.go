package main

// Hot swap from the CLI: `eddy job swap` replaces one node's module or
// configuration in place, `eddy job upgrade` applies a new spec of a
// running job (swaps, or a rescale through a savepoint), and the nodes
// and swap history of `eddy job status`
// (docs/rfcs/2026-12-02-hot-swap.md).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// Default deadlines: a swap waits for the prepare phase (compiling the
// module on every worker of the node) and a savepoint; an upgrade for
// several swaps, or for a savepoint of the whole job and a submission.
const (
	swapTimeout    = 5 * time.Minute
	upgradeTimeout = 10 * time.Minute
)

// setDefaultTimeout changes the default of --timeout before parsing.
func setDefaultTimeout(fs *flag.FlagSet, d time.Duration) {
	if f := fs.Lookup("timeout"); f != nil {
		_ = f.Value.Set(d.String())
		f.DefValue = f.Value.String()
	}
}

// swapFlags are the flags of `eddy job swap`.
type swapFlags struct {
	node, module, config string
	allowDroppedState    bool
}

func (s *swapFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.node, "node", "", "the Wasm node to swap (its name in the job spec)")
	fs.StringVar(&s.module, "module", "", "the new module, NAME@VERSION (NAME alone: its latest version); default: keep the node's")
	fs.StringVar(&s.config, "config", "", "the node's new configuration, a JSON object; default: keep the node's")
	fs.BoolVar(&s.allowDroppedState, "allow-dropped-state", false, "drop the states the running version declares and the new one does not, instead of refusing the swap")
}

// request checks the flags and builds the call; the error is a usage
// error of one line.
func (s *swapFlags) request(tenant, job string, configSet bool) (*eddyv1.SwapModuleRequest, error) {
	if s.node == "" {
		return nil, errors.New("job swap needs --node NAME (the Wasm node of the job to swap)")
	}
	if s.module == "" && !configSet {
		return nil, errors.New("job swap needs --module NAME@VERSION, --config JSON or both")
	}
	if s.module != "" {
		name, _, err := parseRef(s.module)
		if err != nil {
			return nil, fmt.Errorf("--module: %w", err)
		}
		if name == "" {
			return nil, fmt.Errorf("--module %q: the module name is missing (NAME@VERSION)", s.module)
		}
	}
	req := &eddyv1.SwapModuleRequest{Tenant: tenant, JobId: job, Node: s.node, Module: s.module,
		AllowDroppedState: s.allowDroppedState}
	if configSet {
		if _, err := jobspec.DecodeConfig([]byte(s.config)); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(s.config)); err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		req.ConfigJson, req.SetConfig = compact.String(), true
	}
	return req, nil
}

// flagSet reports whether the flag name was given on the command line
// (--config ” is a given, invalid configuration; no --config keeps it).
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func jobSwap(fs *flag.FlagSet, cf *clientFlags, args []string, stdout io.Writer) error {
	var sf swapFlags
	sf.register(fs)
	setDefaultTimeout(fs, swapTimeout)
	if err := parseFlags(fs, args, 1, "job swap takes one job id"); err != nil {
		return err
	}
	req, err := sf.request(cf.tenant, fs.Arg(0), flagSet(fs, "config"))
	if err != nil {
		return usageError{err}
	}
	c, ctx, done, err := cf.dial()
	if err != nil {
		return err
	}
	defer done()
	return swapOne(ctx, c, req, cf.timeout, stdout)
}

// swapOne calls SwapModule and prints its outcome; anything but SWAPPED
// is an error.
func swapOne(ctx context.Context, c eddyv1.ControlClient, req *eddyv1.SwapModuleRequest, timeout time.Duration, stdout io.Writer) error {
	resp, err := c.SwapModule(ctx, req)
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: node %s: swap still in progress after --timeout %s: it goes on; eddy job status %s shows how it ends",
				req.GetJobId(), req.GetNode(), timeout, req.GetJobId())
		}
		return rpcError(fmt.Sprintf("%s: node %s: swap", req.GetJobId(), req.GetNode()), err)
	}
	line, ok := swapOutcome(req.GetJobId(), resp.GetSwap())
	if !ok {
		return errors.New(line)
	}
	fmt.Fprintln(stdout, line)
	return nil
}

// swapOutcome is the one line a swap's outcome prints, and whether the
// node now runs the new version.
func swapOutcome(job string, r *eddyv1.SwapRecord) (string, bool) {
	prefix := fmt.Sprintf("%s: node %s", job, r.GetNode())
	reason := cmp.Or(r.GetReason(), "no reason given")
	switch r.GetState() {
	case eddyv1.SwapState_SWAP_STATE_SWAPPED:
		return fmt.Sprintf("%s swapped %s at savepoint %d (pause %s)", prefix, swapChange(r), r.GetSavepointId(), formatPause(r.GetPauseUs())), true
	case eddyv1.SwapState_SWAP_STATE_REFUSED:
		return fmt.Sprintf("%s swap refused: %s", prefix, reason), false
	case eddyv1.SwapState_SWAP_STATE_FAILED:
		return fmt.Sprintf("%s swap failed: %s (the node runs %s)", prefix, reason, r.GetFromModule()), false
	case eddyv1.SwapState_SWAP_STATE_ROLLED_BACK:
		return fmt.Sprintf("%s swap rolled back to %s: %s", prefix, r.GetFromModule(), reason), false
	case eddyv1.SwapState_SWAP_STATE_PREPARING, eddyv1.SwapState_SWAP_STATE_SWAPPING:
		return fmt.Sprintf("%s swap still in progress (%s): eddy job status %s shows how it ends", prefix, swapState(r.GetState()), job), false
	}
	return fmt.Sprintf("%s swap in an unknown state %s", prefix, r.GetState()), false
}

// swapChange is "counter@1 -> counter@2", with the configuration when it
// changed too.
func swapChange(r *eddyv1.SwapRecord) string {
	from, to := r.GetFromModule(), r.GetToModule()
	switch {
	case from == to && r.GetConfigChanged():
		return from + " (new configuration)"
	case r.GetConfigChanged():
		return from + " -> " + to + " (new configuration)"
	}
	return from + " -> " + to
}

// formatPause writes a pause in microseconds as milliseconds with one
// decimal: a swap's pause is meant to be tens of milliseconds.
func formatPause(us int64) string {
	return fmt.Sprintf("%.1f ms", float64(us)/1000)
}

func swapState(s eddyv1.SwapState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SWAP_STATE_"))
}

func jobUpgrade(fs *flag.FlagSet, cf *clientFlags, args []string, stdout io.Writer) error {
	var allowDropped bool
	fs.BoolVar(&allowDropped, "allow-dropped-state", false, "drop the states a running version declares and its new one does not, instead of refusing the swap")
	setDefaultTimeout(fs, upgradeTimeout)
	if err := parseFlags(fs, args, 2, "job upgrade takes a job id and a job spec file"); err != nil {
		return err
	}
	job, file := fs.Arg(0), fs.Arg(1)
	newYAML, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("job upgrade: %w", err)
	}
	newSpec, err := jobspec.Parse(newYAML, file)
	if err != nil {
		return err
	}
	c, ctx, done, err := cf.dial()
	if err != nil {
		return err
	}
	defer done()
	st, err := c.JobStatus(ctx, &eddyv1.JobStatusRequest{Tenant: cf.tenant, JobId: job})
	if err != nil {
		return rpcError("job "+job, err)
	}
	running, err := runningSpec(st)
	if err != nil {
		return fmt.Errorf("job %s: %w", job, err)
	}
	d, err := jobspec.Diff(running, newSpec)
	if err != nil {
		var de *jobspec.DiffError
		if errors.As(err, &de) {
			return usageError{errors.New(de.For(job))}
		}
		return fmt.Errorf("job %s: %w", job, err)
	}
	switch {
	case d.Empty():
		fmt.Fprintf(stdout, "%s: nothing to change\n", job)
		return nil
	case d.Rescale:
		sp, err := c.TriggerSavepoint(ctx, &eddyv1.TriggerSavepointRequest{Tenant: cf.tenant, JobId: job, Stop: true})
		if err != nil {
			return rpcError(fmt.Sprintf("%s: rescale: savepoint", job), err)
		}
		sub, err := c.SubmitJob(ctx, &eddyv1.SubmitJobRequest{Tenant: cf.tenant, SpecYaml: newYAML, SpecName: filepath.Base(file),
			FromSavepoint: sp.GetPath(), RequestId: "upgrade " + job + " " + sp.GetPath()})
		if err != nil {
			return rpcError(fmt.Sprintf("%s: stopped at savepoint %d (%s), but submitting the new spec", job, sp.GetCheckpointId(), sp.GetPath()), err)
		}
		fmt.Fprintln(stdout, rescaleLine(job, sub.GetJobId(), sp, d))
		return nil
	}
	for _, ch := range d.Changes {
		req := &eddyv1.SwapModuleRequest{Tenant: cf.tenant, JobId: job, Node: ch.Node, Module: ch.Module,
			AllowDroppedState: allowDropped}
		if ch.ConfigChanged {
			req.ConfigJson, req.SetConfig = string(ch.Config), true
		}
		if err := swapOne(ctx, c, req, cf.timeout, stdout); err != nil {
			return err
		}
	}
	return nil
}

// rescaleLine says what a rescale did: a new job, from which savepoint.
func rescaleLine(job, newJob string, sp *eddyv1.TriggerSavepointResponse, d *jobspec.SpecDiff) string {
	line := fmt.Sprintf("%s: rescaled through savepoint %d (%s): stopped, the new spec runs as %s", job, sp.GetCheckpointId(), sp.GetPath(), newJob)
	if len(d.Changes) > 0 {
		nodes := make([]string, len(d.Changes))
		for i, c := range d.Changes {
			nodes[i] = c.Node
		}
		line += ", with the new modules or configurations of " + strings.Join(nodes, ", ")
	}
	return line
}

// runningSpec is the spec the job runs: the one it was submitted with,
// and over it the module and configuration of every node a completed swap
// changed (JobStatus lists what each Wasm node runs). Nodes never swapped
// keep their references as written, so that `counter` in both specs is no
// change even though the job runs counter@3.
func runningSpec(st *eddyv1.JobStatusResponse) (*jobspec.Spec, error) {
	if len(st.GetSpecYaml()) == 0 {
		return nil, errors.New("the coordinator did not return the job's spec, which an upgrade diffs against (is it older than this eddy?)")
	}
	spec, err := jobspec.Parse(st.GetSpecYaml(), "")
	if err != nil {
		return nil, fmt.Errorf("the job's spec: %w", err)
	}
	swapped := map[string]bool{}
	for _, r := range st.GetSwaps() {
		if r.GetState() == eddyv1.SwapState_SWAP_STATE_SWAPPED {
			swapped[r.GetNode()] = true
		}
	}
	for _, n := range st.GetNodes() {
		if !swapped[n.GetName()] {
			continue
		}
		var cfg []byte
		if n.GetConfigJson() != "" {
			cfg = []byte(n.GetConfigJson())
		}
		if err := spec.Override(n.GetName(), n.GetModule(), cfg); err != nil {
			return nil, fmt.Errorf("the job's spec: %w", err)
		}
	}
	return spec, nil
}

// printNodes writes what each Wasm node of a job runs.
func printNodes(w io.Writer, nodes []*eddyv1.NodeInfo) {
	if len(nodes) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tMODULE\tCONFIG")
	for _, n := range nodes {
		cfg := n.GetConfigJson()
		if cfg == "{}" {
			cfg = ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n.GetName(), n.GetModule(), cfg)
	}
	tw.Flush()
}

// printSwaps writes a job's swap history, oldest first.
func printSwaps(w io.Writer, swaps []*eddyv1.SwapRecord) {
	if len(swaps) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SWAP\tTIME\tNODE\tCHANGE\tSAVEPOINT\tPAUSE\tOUTCOME")
	for _, r := range swaps {
		savepoint, pause := "-", "-"
		if r.GetSavepointId() != 0 {
			savepoint = fmt.Sprint(r.GetSavepointId())
		}
		switch r.GetState() {
		case eddyv1.SwapState_SWAP_STATE_SWAPPED, eddyv1.SwapState_SWAP_STATE_ROLLED_BACK:
			pause = formatPause(r.GetPauseUs())
		}
		outcome := strings.TrimPrefix(r.GetState().String(), "SWAP_STATE_")
		if r.GetRollbackArmed() {
			outcome += " (rollback armed)"
		}
		if r.GetReason() != "" {
			outcome += ": " + r.GetReason()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.GetSwapId(),
			time.UnixMilli(r.GetBeganUnixMs()).UTC().Format(time.RFC3339), r.GetNode(), swapChange(r), savepoint, pause, outcome)
	}
	tw.Flush()
}
