package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// swapJob is a running job with a swap of node "count" being prepared,
// its tasks on workers w1 and w2.
func swapJob() fsm.Job {
	return fsm.Job{
		ID: "job-1", State: fsm.JobRunning, Attempt: 1,
		Tasks:      []string{"src[0]", "count[0]", "count[1]"},
		Deployment: map[string]string{"src[0]": "w1", "count[0]": "w1", "count[1]": "w2"},
		Swaps:      []fsm.Swap{{ID: 3, Node: "count", Attempt: 1, State: fsm.SwapPreparing, Began: t0}},
	}
}

func countWorkers(j *fsm.Job, node string) []string {
	if node != "count" {
		return nil
	}
	return []string{"w1", "w2"}
}

func TestDecideSwaps(t *testing.T) {
	key := swapKey{"job-1", 3}
	ok := swapReport{attempt: 1, ok: true}
	cases := []struct {
		name      string
		now       time.Time
		job       func(*fsm.Job)
		reports   map[string]swapReport
		wantEnd   string // EndSwap reason substring; "" for none
		wantReady bool
		wantWake  bool
	}{
		{name: "prepared everywhere", now: t0.Add(time.Second), reports: map[string]swapReport{"w1": ok, "w2": ok}, wantReady: true},
		{name: "one worker missing", now: t0.Add(time.Second), reports: map[string]swapReport{"w1": ok}, wantWake: true},
		{name: "report of an older attempt", now: t0.Add(time.Second), reports: map[string]swapReport{"w1": ok, "w2": {attempt: 0, ok: true}}, wantWake: true},
		{name: "refused", now: t0.Add(time.Second), reports: map[string]swapReport{"w1": ok, "w2": {attempt: 1, reason: "node count: state \"count\" changed kind"}},
			wantEnd: "changed kind"},
		{name: "timed out", now: t0.Add(swapPrepareTimeout), reports: map[string]swapReport{"w1": ok}, wantEnd: "not prepared within 30s by worker w2"},
		{name: "a task finished", now: t0.Add(time.Second), job: func(j *fsm.Job) { j.FinishedTasks = []string{"src[0]"} }, wantEnd: "needs every task running"},
		{name: "swapping already", now: t0.Add(time.Second), job: func(j *fsm.Job) { j.Swaps[0].State = fsm.SwapSwapping },
			reports: map[string]swapReport{"w1": ok, "w2": ok}},
		{name: "job restarting", now: t0.Add(time.Second), job: func(j *fsm.Job) { j.State = fsm.JobRestarting },
			reports: map[string]swapReport{"w1": ok, "w2": ok}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := swapJob()
			if tc.job != nil {
				tc.job(&j)
			}
			cmds, ready, wake := decideSwaps(tc.now, []fsm.Job{j}, map[swapKey]map[string]swapReport{key: tc.reports}, countWorkers)
			switch {
			case tc.wantEnd == "" && len(cmds) > 0:
				t.Fatalf("commands %+v, want none", cmds[0])
			case tc.wantEnd != "":
				if len(cmds) != 1 {
					t.Fatalf("%d commands, want one EndSwap", len(cmds))
				}
				end, isEnd := cmds[0].(*fsm.EndSwap)
				if !isEnd || end.State != fsm.SwapRefused || end.SwapID != 3 || !strings.Contains(end.Reason, tc.wantEnd) {
					t.Fatalf("command %+v, want EndSwap REFUSED of swap 3 with %q", cmds[0], tc.wantEnd)
				}
			}
			if got := ready["job-1"] == 3; got != tc.wantReady {
				t.Errorf("ready %v, want %v", ready, tc.wantReady)
			}
			if got := !wake.IsZero(); got != tc.wantWake {
				t.Errorf("wake at %v, want a wake-up: %v", wake, tc.wantWake)
			}
		})
	}
}

// A job whose swap is prepared everywhere takes its swap savepoint before
// a requested savepoint or a periodic checkpoint.
func TestSwapSavepointFirst(t *testing.T) {
	j := swapJob()
	p := decideCheckpoints(checkpointRound{
		now: t0.Add(time.Minute), jobs: []fsm.Job{j},
		configs:    map[string]checkpointConfig{j.ID: {periodic: true, interval: time.Second, timeout: time.Minute}},
		running:    map[string]time.Time{j.ID: t0},
		savepoints: map[string]bool{j.ID: true},
		swapReady:  map[string]uint64{j.ID: 3},
	})
	if len(p.commands) != 1 {
		t.Fatalf("%d commands, want 1", len(p.commands))
	}
	tc, ok := p.commands[0].(*fsm.TriggerCheckpoint)
	if !ok || !tc.Savepoint || tc.Swap != 3 {
		t.Fatalf("command %+v, want the trigger of swap 3's savepoint", p.commands[0])
	}
}

func TestCompactObject(t *testing.T) {
	for in, want := range map[string]string{`{"a": 1}`: `{"a":1}`, ` {} `: `{}`} {
		got, err := compactObject(in)
		if err != nil || string(got) != want {
			t.Errorf("compactObject(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `[1]`, `1`, `{"a":1} {}`, `{"a":`, `null`} {
		if _, err := compactObject(bad); err == nil {
			t.Errorf("compactObject(%q) accepted", bad)
		}
	}
	if !jsonEqual([]byte(`{"a":1,"b":2}`), []byte(`{"b":2, "a":1}`)) || jsonEqual([]byte(`{"a":1}`), []byte(`{"a":2}`)) {
		t.Error("jsonEqual compares by value")
	}
}
