package main

import (
	"bytes"
	"cmp"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// swapScript is a Control server on 127.0.0.1 that answers JobStatus with
// a spec and SwapModule with scripted outcomes, recording the calls: it
// tests the order of the CLI's calls and what it prints of each answer,
// not the swap (the end-to-end tests of the coordinator do).
type swapScript struct {
	eddyv1.UnimplementedControlServer
	status   *eddyv1.JobStatusResponse
	outcomes map[string]eddyv1.SwapState // by node; SWAPPED when absent

	mu    sync.Mutex
	calls []*eddyv1.SwapModuleRequest
}

func (s *swapScript) JobStatus(context.Context, *eddyv1.JobStatusRequest) (*eddyv1.JobStatusResponse, error) {
	return s.status, nil
}

func (s *swapScript) SwapModule(_ context.Context, req *eddyv1.SwapModuleRequest) (*eddyv1.SwapModuleResponse, error) {
	s.mu.Lock()
	s.calls = append(s.calls, req)
	id := uint64(len(s.calls))
	s.mu.Unlock()
	state, ok := s.outcomes[req.GetNode()]
	if !ok {
		state = eddyv1.SwapState_SWAP_STATE_SWAPPED
	}
	r := &eddyv1.SwapRecord{SwapId: id, Node: req.GetNode(), FromModule: "old@1", ToModule: cmp.Or(req.GetModule(), "old@1"),
		ConfigChanged: req.GetSetConfig(), State: state, SavepointId: 10 + id, PauseUs: 2500}
	if state != eddyv1.SwapState_SWAP_STATE_SWAPPED {
		r.Reason, r.SavepointId, r.PauseUs = "eddy_open failed: bad currency", 0, 0
	}
	return &eddyv1.SwapModuleResponse{Swap: r}, nil
}

func serveScript(t *testing.T, s *swapScript) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	eddyv1.RegisterControlServer(srv, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

const seqJob = `name: j
checkpoint: {interval: 1s}
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: enrich
    input: src
    wasm: {module: enrich@1, config: {currency: EUR}}
  - name: count
    input: enrich
    wasm: {module: counter@1}
  - name: tag
    input: count
    wasm: {module: tag@1}
  - name: out
    input: tag
    sink: {discard: {}}
`

// TestUpgradeSwapsInOrder: `job upgrade` makes one SwapModule call per
// changed node, in spec order, with the new module or configuration,
// prints each outcome and stops at the first swap that does not succeed.
func TestUpgradeSwapsInOrder(t *testing.T) {
	t.Setenv("EDDY_CONFIG", filepath.Join(t.TempDir(), "config"))
	t.Setenv("EDDY_TOKEN", "")
	newSpec := strings.NewReplacer("enrich@1, config: {currency: EUR}", "enrich@1, config: {currency: XXX}",
		"counter@1", "counter@2", "tag@1", "tag@2").Replace(seqJob)
	file := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(file, []byte(newSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		outcomes map[string]eddyv1.SwapState
		calls    []string // node module config
		stdout   string
		stderr   string
		code     int
	}{
		{name: "all swapped",
			calls: []string{`enrich  {"currency":"XXX"}`, "count counter@2 ", "tag tag@2 "},
			stdout: "job-1: node enrich swapped old@1 (new configuration) at savepoint 11 (pause 2.5 ms)\n" +
				"job-1: node count swapped old@1 -> counter@2 at savepoint 12 (pause 2.5 ms)\n" +
				"job-1: node tag swapped old@1 -> tag@2 at savepoint 13 (pause 2.5 ms)\n"},
		{name: "the second refused",
			outcomes: map[string]eddyv1.SwapState{"count": eddyv1.SwapState_SWAP_STATE_REFUSED},
			calls:    []string{`enrich  {"currency":"XXX"}`, "count counter@2 "},
			stdout:   "job-1: node enrich swapped old@1 (new configuration) at savepoint 11 (pause 2.5 ms)\n",
			stderr:   "eddy: job-1: node count swap refused: eddy_open failed: bad currency\n",
			code:     1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &swapScript{status: &eddyv1.JobStatusResponse{SpecYaml: []byte(seqJob)}, outcomes: tc.outcomes}
			addr := serveScript(t, s)
			var stdout, stderr bytes.Buffer
			code := run([]string{"job", "upgrade", "job-1", file, "--coordinator", addr}, &stdout, &stderr)
			if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Fatalf("exit %d\nstdout %q\nstderr %q\nwant %d\n%q\n%q", code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
			var calls []string
			for _, c := range s.calls {
				if c.GetJobId() != "job-1" || c.GetSetConfig() != (c.GetConfigJson() != "") {
					t.Errorf("call %v", c)
				}
				calls = append(calls, c.GetNode()+" "+c.GetModule()+" "+c.GetConfigJson())
			}
			if strings.Join(calls, "\n") != strings.Join(tc.calls, "\n") {
				t.Fatalf("calls\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(tc.calls, "\n"))
			}
		})
	}
}

// TestSwapCLIOutcome: `job swap` prints a swapped outcome on stdout and
// exits 0, a refusal on stderr with exit 1.
func TestSwapCLIOutcome(t *testing.T) {
	t.Setenv("EDDY_CONFIG", filepath.Join(t.TempDir(), "config"))
	t.Setenv("EDDY_TOKEN", "")
	s := &swapScript{outcomes: map[string]eddyv1.SwapState{"bad": eddyv1.SwapState_SWAP_STATE_REFUSED}}
	addr := serveScript(t, s)
	var stdout, stderr bytes.Buffer
	code := run([]string{"job", "swap", "job-2", "--node", "count", "--module", "counter@2", "--allow-dropped-state", "--coordinator", addr}, &stdout, &stderr)
	if code != 0 || stdout.String() != "job-2: node count swapped old@1 -> counter@2 at savepoint 11 (pause 2.5 ms)\n" || stderr.Len() != 0 {
		t.Fatalf("swap: exit %d %q %q", code, stdout.String(), stderr.String())
	}
	if c := s.calls[0]; !c.GetAllowDroppedState() || c.GetSetConfig() {
		t.Fatalf("request %v", c)
	}
	stdout.Reset()
	code = run([]string{"job", "swap", "job-2", "--node", "bad", "--config", `{"a": 1}`, "--coordinator", addr}, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 || stderr.String() != "eddy: job-2: node bad swap refused: eddy_open failed: bad currency\n" {
		t.Fatalf("refused swap: exit %d %q %q", code, stdout.String(), stderr.String())
	}
}
