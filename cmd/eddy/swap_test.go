package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// TestSwapFlags: `job swap` flags become the request, or one line saying
// what is wrong, before anything is dialed.
func TestSwapFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want *eddyv1.SwapModuleRequest // nil: err
		err  string
	}{
		{name: "module", args: []string{"job-3", "--node", "count", "--module", "counter@2"},
			want: &eddyv1.SwapModuleRequest{JobId: "job-3", Node: "count", Module: "counter@2"}},
		{name: "latest version", args: []string{"--node", "count", "--module", "counter", "job-3"},
			want: &eddyv1.SwapModuleRequest{JobId: "job-3", Node: "count", Module: "counter"}},
		{name: "config only, compacted", args: []string{"job-3", "--node", "enrich", "--config", `{ "currency" : "USD" }`},
			want: &eddyv1.SwapModuleRequest{JobId: "job-3", Node: "enrich", ConfigJson: `{"currency":"USD"}`, SetConfig: true}},
		{name: "empty object is a config", args: []string{"job-3", "--node", "enrich", "--config", `{}`},
			want: &eddyv1.SwapModuleRequest{JobId: "job-3", Node: "enrich", ConfigJson: `{}`, SetConfig: true}},
		{name: "module, config and dropped state",
			args: []string{"job-3", "--node", "count", "--module", "counter@2", "--config", `{"a":1}`, "--allow-dropped-state"},
			want: &eddyv1.SwapModuleRequest{JobId: "job-3", Node: "count", Module: "counter@2", ConfigJson: `{"a":1}`, SetConfig: true, AllowDroppedState: true}},
		{name: "no node", args: []string{"job-3", "--module", "counter@2"}, err: "job swap needs --node NAME"},
		{name: "nothing to swap", args: []string{"job-3", "--node", "count"}, err: "job swap needs --module NAME@VERSION, --config JSON or both"},
		{name: "bad version", args: []string{"job-3", "--node", "count", "--module", "counter@two"},
			err: `--module: module reference "counter@two": the version after @ must be a positive number`},
		{name: "version 0", args: []string{"job-3", "--node", "count", "--module", "counter@0"}, err: "must be a positive number"},
		{name: "no name", args: []string{"job-3", "--node", "count", "--module", "@2"}, err: `--module "@2": the module name is missing`},
		{name: "config not JSON", args: []string{"job-3", "--node", "count", "--config", `{currency: USD}`}, err: "--config: config is not valid JSON"},
		{name: "config a list", args: []string{"job-3", "--node", "count", "--config", `[1]`}, err: "--config: config must be a JSON object"},
		{name: "config empty", args: []string{"job-3", "--node", "count", "--config", ``}, err: "--config: config must be a JSON object"},
		{name: "no job", args: []string{"--node", "count", "--module", "counter@2"}, err: "job swap takes one job id (got 0 arguments)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("job swap", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var cf clientFlags
			cf.register(fs)
			var sf swapFlags
			sf.register(fs)
			var req *eddyv1.SwapModuleRequest
			err := parseFlags(fs, tc.args, 1, "job swap takes one job id")
			if err == nil {
				req, err = sf.request(cf.tenant, fs.Arg(0), flagSet(fs, "config"))
			}
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one line with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.String() != tc.want.String() {
				t.Fatalf("request\n%v\nwant\n%v", req, tc.want)
			}
		})
	}
}

// TestSwapCLIUsage: a bad flag is exit 2 with one line, and nothing is
// dialed (no coordinator listens on the address).
func TestSwapCLIUsage(t *testing.T) {
	t.Setenv("EDDY_CONFIG", t.TempDir()+"/config")
	tests := []struct {
		args []string
		err  string
	}{
		{[]string{"job", "swap", "job-1", "--node", "n", "--config", "nope"}, "eddy: --config: config must be a JSON object"},
		{[]string{"job", "swap", "job-1", "--module", "m@1"}, "eddy: job swap needs --node NAME"},
		{[]string{"job", "upgrade", "job-1"}, "eddy: job upgrade takes a job id and a job spec file (got 1 arguments)"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := run(append(tc.args, "--coordinator", "127.0.0.1:1"), &stdout, &stderr)
		if code != 2 || !strings.HasPrefix(stderr.String(), tc.err) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.err)
		}
	}
}

func TestSwapOutcome(t *testing.T) {
	tests := []struct {
		name string
		r    *eddyv1.SwapRecord
		want string
		ok   bool
	}{
		{"swapped", &eddyv1.SwapRecord{Node: "count", FromModule: "counter@1", ToModule: "counter@2",
			State: eddyv1.SwapState_SWAP_STATE_SWAPPED, SavepointId: 7, PauseUs: 12345},
			"job-3: node count swapped counter@1 -> counter@2 at savepoint 7 (pause 12.3 ms)", true},
		{"config only", &eddyv1.SwapRecord{Node: "enrich", FromModule: "enrich@1", ToModule: "enrich@1", ConfigChanged: true,
			State: eddyv1.SwapState_SWAP_STATE_SWAPPED, SavepointId: 8, PauseUs: 900},
			"job-3: node enrich swapped enrich@1 (new configuration) at savepoint 8 (pause 0.9 ms)", true},
		{"module and config", &eddyv1.SwapRecord{Node: "enrich", FromModule: "enrich@1", ToModule: "enrich@2", ConfigChanged: true,
			State: eddyv1.SwapState_SWAP_STATE_SWAPPED, SavepointId: 9, PauseUs: 1_500_000},
			"job-3: node enrich swapped enrich@1 -> enrich@2 (new configuration) at savepoint 9 (pause 1500.0 ms)", true},
		{"refused", &eddyv1.SwapRecord{Node: "count", FromModule: "counter@1", ToModule: "counter@2",
			State: eddyv1.SwapState_SWAP_STATE_REFUSED, Reason: `state "n" is a value in counter@1 and a map in counter@2`},
			`job-3: node count swap refused: state "n" is a value in counter@1 and a map in counter@2`, false},
		{"failed", &eddyv1.SwapRecord{Node: "count", FromModule: "counter@1", ToModule: "counter@2",
			State: eddyv1.SwapState_SWAP_STATE_FAILED, Reason: "worker w2 lost"},
			"job-3: node count swap failed: worker w2 lost (the node runs counter@1)", false},
		{"rolled back", &eddyv1.SwapRecord{Node: "count", FromModule: "counter@1", ToModule: "counter@2",
			State: eddyv1.SwapState_SWAP_STATE_ROLLED_BACK, Reason: "trap: unreachable"},
			"job-3: node count swap rolled back to counter@1: trap: unreachable", false},
		{"refused without a reason", &eddyv1.SwapRecord{Node: "count", State: eddyv1.SwapState_SWAP_STATE_REFUSED},
			"job-3: node count swap refused: no reason given", false},
		{"in progress", &eddyv1.SwapRecord{Node: "count", State: eddyv1.SwapState_SWAP_STATE_SWAPPING},
			"job-3: node count swap still in progress (swapping): eddy job status job-3 shows how it ends", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := swapOutcome("job-3", tc.r)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("swapOutcome = %q, %v\nwant %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestPrintStatusSwaps: `job status` lists the Wasm nodes (config unless
// empty) and the swap history.
func TestPrintStatusSwaps(t *testing.T) {
	began := time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC).UnixMilli()
	var out bytes.Buffer
	printStatus(&out, &eddyv1.JobStatusResponse{
		Job: &eddyv1.JobSummary{JobId: "job-3", Name: "j", State: eddyv1.JobState_JOB_STATE_RUNNING, Attempt: 1},
		Nodes: []*eddyv1.NodeInfo{
			{Name: "enrich", Module: "enrich@2", ConfigJson: `{"currency":"USD"}`},
			{Name: "count", Module: "counter@2", ConfigJson: `{}`},
		},
		Swaps: []*eddyv1.SwapRecord{
			{SwapId: 1, Node: "count", FromModule: "counter@1", ToModule: "counter@2", State: eddyv1.SwapState_SWAP_STATE_REFUSED,
				BeganUnixMs: began, Reason: "missing export eddy_process"},
			{SwapId: 2, Node: "count", FromModule: "counter@1", ToModule: "counter@2", State: eddyv1.SwapState_SWAP_STATE_SWAPPED,
				BeganUnixMs: began, SavepointId: 7, PauseUs: 12345, RollbackArmed: true},
			{SwapId: 3, Node: "enrich", FromModule: "enrich@1", ToModule: "enrich@2", ConfigChanged: true,
				State: eddyv1.SwapState_SWAP_STATE_ROLLED_BACK, BeganUnixMs: began, SavepointId: 9, PauseUs: 2000, Reason: "trap"},
			{SwapId: 4, Node: "enrich", FromModule: "enrich@1", ToModule: "enrich@2", State: eddyv1.SwapState_SWAP_STATE_PREPARING,
				BeganUnixMs: began},
		},
	})
	var got []string
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n")[1:] {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"NODE MODULE CONFIG",
		`enrich enrich@2 {"currency":"USD"}`,
		"count counter@2",
		"SWAP TIME NODE CHANGE SAVEPOINT PAUSE OUTCOME",
		"1 2026-12-02T01:02:03Z count counter@1 -> counter@2 - - REFUSED: missing export eddy_process",
		"2 2026-12-02T01:02:03Z count counter@1 -> counter@2 7 12.3 ms SWAPPED (rollback armed)",
		"3 2026-12-02T01:02:03Z enrich enrich@1 -> enrich@2 (new configuration) 9 2.0 ms ROLLED_BACK: trap",
		"4 2026-12-02T01:02:03Z enrich enrich@1 -> enrich@2 - - PREPARING",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("status\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRunningSpec: an upgrade diffs against the submitted spec with the
// completed swaps applied, and only those: a node never swapped keeps its
// reference as written (the server may list it resolved, or a version a
// refused swap did not install).
func TestRunningSpec(t *testing.T) {
	st := &eddyv1.JobStatusResponse{
		SpecYaml: []byte(seqJob),
		Nodes: []*eddyv1.NodeInfo{
			{Name: "enrich", Module: "enrich@2", ConfigJson: `{"currency":"USD"}`},
			{Name: "count", Module: "counter@3", ConfigJson: `{}`},
			{Name: "tag", Module: "tag@1", ConfigJson: `{}`},
		},
		Swaps: []*eddyv1.SwapRecord{
			{Node: "enrich", State: eddyv1.SwapState_SWAP_STATE_SWAPPED},
			{Node: "count", State: eddyv1.SwapState_SWAP_STATE_REFUSED},
		},
	}
	spec, err := runningSpec(st)
	if err != nil {
		t.Fatal(err)
	}
	enrich, _ := spec.Node("enrich").Wasm.ConfigJSON()
	if m := spec.Node("enrich").Wasm.Module; m != "enrich@2" || string(enrich) != `{"currency":"USD"}` {
		t.Errorf("enrich runs %s %s, want enrich@2 {\"currency\":\"USD\"}", m, enrich)
	}
	if m := spec.Node("count").Wasm.Module; m != "counter@1" {
		t.Errorf("count = %s, want counter@1 as written", m)
	}
	if _, err := runningSpec(&eddyv1.JobStatusResponse{}); err == nil || !strings.Contains(err.Error(), "did not return the job's spec") {
		t.Errorf("no spec: %v", err)
	}
}

const upgradeJob = `name: upgraded
parallelism: 1
checkpoint: {interval: 500ms}
nodes:
  - name: txns
    source: {generator: {kind: transactions, rate: 2000, cards: 20, seed: 7}}
  - name: per_card
    input: txns
    key_by: card
    window: {tumbling: 1h}
    aggregate: [count]
  - name: out
    input: per_card
    sink: {file: {path: $OUT/counts.jsonl}}
`

// TestUpgradeCLI drives `eddy job upgrade` against a standalone process:
// the same spec is nothing to change, a topology change is refused with
// one line and exit 2 (the job runs on), and a parallelism change stops
// the job with a savepoint and runs the new spec from it as a new job.
// `eddy job swap` of a node that runs no module is the coordinator's
// one-line refusal.
func TestUpgradeCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	cli := standaloneCLI(t, dir, "--data-dir", filepath.Join(dir, "data"), "--slots", "4")
	spec, out := inlineSpec(t, upgradeJob)
	r := cli("job", "submit", spec)
	if r.code != 0 {
		t.Fatalf("submit: %s", r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	testkit.Eventually(t, 30*time.Second, "the job running", func() bool {
		return strings.Contains(cli("job", "status", id).stdout, "RUNNING, attempt 1")
	})
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(out, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "$OUT", out)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	if r := cli("job", "upgrade", id, spec); r.code != 0 || r.stdout != id+": nothing to change\n" {
		t.Fatalf("upgrade to the same spec: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	topology := write("topology.yaml", strings.Replace(upgradeJob, "counts.jsonl", "other.jsonl", 1))
	r = cli("job", "upgrade", id, topology)
	want := "eddy: node out: its sink changed: a topology change cannot be applied in place; stop the job with a savepoint (eddy savepoint create " +
		id + " --stop) and submit the new spec with --from-savepoint\n"
	if r.code != 2 || r.stderr != want {
		t.Fatalf("upgrade with another sink: exit %d\n%q\nwant\n%q", r.code, r.stderr, want)
	}
	r = cli("job", "swap", id, "--node", "out", "--module", "counter@1")
	if r.code != 1 || !strings.Contains(r.stderr, "is not a Wasm node") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("swap of a sink: exit %d %q", r.code, r.stderr)
	}
	if st := cli("job", "status", id).stdout; !strings.Contains(st, "RUNNING, attempt 1") {
		t.Fatalf("the refusals touched the job:\n%s", st)
	}

	r = cli("job", "upgrade", id, write("source.yaml", strings.Replace(upgradeJob, "parallelism: 1", "parallelism: 2", 1)))
	if r.code != 2 || !strings.HasPrefix(r.stderr, "eddy: node txns: the parallelism of a source changed from 1 to 2: ") {
		t.Fatalf("upgrade of a source's parallelism: exit %d %q", r.code, r.stderr)
	}
	// The source keeps its split; the window and the sink get two subtasks.
	wider := write("wider.yaml", strings.NewReplacer("parallelism: 1", "parallelism: 2",
		"  - name: txns\n", "  - name: txns\n    parallelism: 1\n").Replace(upgradeJob))
	r = cli("job", "upgrade", id, wider)
	m := regexp.MustCompile(`^` + id + `: rescaled through savepoint (\d+) \(tenants/default/savepoints/` + id + `-\d+\): stopped, the new spec runs as (job-\d+)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("rescale: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	next := m[2]
	testkit.Eventually(t, 30*time.Second, "the old job canceled, the new one running with two subtasks", func() bool {
		old, cur := cli("job", "status", id).stdout, cli("job", "status", next).stdout
		return strings.Contains(old, "CANCELED") && strings.Contains(cur, "RUNNING, attempt 1") && strings.Contains(cur, "per_card[1]")
	})
	if r := cli("job", "upgrade", next, wider); r.code != 0 || r.stdout != next+": nothing to change\n" {
		t.Fatalf("upgrade of the new job to its own spec: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}
