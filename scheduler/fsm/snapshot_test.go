package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }

// snapshotBytes takes a snapshot the way Raft does.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.canceled {
		t.Fatalf("sink closed %v canceled %v", sink.closed, sink.canceled)
	}
	return sink.Bytes()
}

// scenario is a busy cluster: two tenants, modules, three workers, jobs in
// every state.
func scenario(h *harness) {
	h.must(&RegisterCoordinator{ID: "c1", RaftAddress: "127.0.0.1:9001", APIAddress: "127.0.0.1:8001"})
	h.must(&CreateTenant{ID: "acme"})
	h.must(&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 1000})
	h.must(&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e2"), Size: 1200})
	h.must(&RegisterModule{Tenant: "acme", Name: "card-stats", SHA256: digest("c1"), Size: 900})
	h.must(&RegisterWorker{ID: "w1", Address: "127.0.0.1:7001", Slots: 2, Incarnation: "a"})
	h.must(&RegisterWorker{ID: "w2", Address: "127.0.0.1:7002", Slots: 2, Incarnation: "a"})
	h.must(&RegisterWorker{ID: "w3", Address: "127.0.0.1:7003", Slots: 1, Incarnation: "a"})
	h.must(&SubmitJob{Tenant: DefaultTenant, Name: "running", Spec: []byte("name: running\n"), Tasks: []string{"src#0", "src#1"}}) // job-9
	h.must(&PlaceJob{JobID: "job-9", Attempt: 1, Deployment: map[string]string{"src#0": "w1", "src#1": "w2"}})
	h.must(&TaskFinished{JobID: "job-9", Attempt: 1, TaskID: "src#0"})
	h.must(&SubmitJob{Tenant: "acme", Name: "restarted", Tasks: []string{"t0"}}) // job-12
	h.must(&PlaceJob{JobID: "job-12", Attempt: 1, Deployment: map[string]string{"t0": "w3"}})
	h.must(&WorkerDown{ID: "w3", Reason: "no heartbeat for 10s"})
	h.must(&SubmitJob{Tenant: "acme", Name: "waiting", Tasks: []string{"a", "b", "c", "d", "e"}}) // job-15
	h.must(&JobWaiting{JobID: "job-15", Message: "waiting for slots: job needs 5, 2 free"})
	h.must(&SubmitJob{Tenant: DefaultTenant, Name: "done", Tasks: []string{"t0"}}) // job-17
	h.must(&PlaceJob{JobID: "job-17", Attempt: 1, Deployment: map[string]string{"t0": "w2"}})
	h.must(&TaskFinished{JobID: "job-17", Attempt: 1, TaskID: "t0"})
	h.must(&SubmitJob{Tenant: DefaultTenant, Name: "canceled", Tasks: []string{"t0"}}) // job-20
	h.must(&CancelJob{Tenant: DefaultTenant, JobID: "job-20"})
	h.must(&SubmitJob{Tenant: DefaultTenant, Name: "failed", Tasks: []string{"t0"}}) // job-22
	h.must(&PlaceJob{JobID: "job-22", Attempt: 1, Deployment: map[string]string{"t0": "w1"}})
	h.must(&TaskFailed{JobID: "job-22", Attempt: 1, TaskID: "t0", Message: "wasm trap: out of bounds memory access"})
	h.must(&FailJob{JobID: "job-22", Message: "restart strategy: no restarts left"})
	if _, err := h.apply(&CancelJob{Tenant: "acme", JobID: "job-9"}); !errors.Is(err, ErrJobNotFound) { // refused
		h.t.Fatalf("cross-tenant cancel: %v", err)
	}

	// A checkpointed job: checkpoints 1 and 2 complete (retaining 2), 3
	// times out, 4 completes and 1 goes, savepoint 5 completes; the files of
	// 1, 3 and 5 are deleted; attempt 1 fails; attempt 2 cannot restore
	// from 5, which is marked bad; attempt 3 has checkpoint 6 in flight.
	h.must(&SubmitJob{Tenant: DefaultTenant, Name: "checkpointed", Tasks: []string{"sink#0", "src#0"}, // job-27
		CheckpointStorage: "s3://bucket/checkpoints"})
	h.must(&PlaceJob{JobID: "job-27", Attempt: 1, Deployment: map[string]string{"src#0": "w1", "sink#0": "w1"}})
	chk := func(id uint64) string { return fmt.Sprintf("tenants/default/jobs/job-27/chk/%d/_manifest.json", id) }
	complete := func(id uint64, full, incremental int64) {
		h.must(&TriggerCheckpoint{JobID: "job-27", Attempt: 1, ID: id})
		h.must(&CheckpointCompleted{JobID: "job-27", Attempt: 1, ID: id, Manifest: chk(id), Retain: 2,
			Duration: 1200 * time.Millisecond, FullSize: full, IncrementalSize: incremental})
	}
	complete(1, 4096, 4096)
	complete(2, 5000, 904)
	h.must(&TriggerCheckpoint{JobID: "job-27", Attempt: 1, ID: 3})
	h.must(&CheckpointFailed{JobID: "job-27", ID: 3, Reason: "timed out after 10m0s: 1 of 2 tasks acknowledged"})
	complete(4, 5100, 100)
	h.must(&TriggerCheckpoint{JobID: "job-27", Attempt: 1, ID: 5, Savepoint: true})
	h.must(&CheckpointCompleted{JobID: "job-27", Attempt: 1, ID: 5, Savepoint: true, Manifest: "tenants/default/savepoints/job-27-5/_manifest.json",
		Duration: 3 * time.Second, FullSize: 5100, IncrementalSize: 5100})
	h.must(&CheckpointsDeleted{JobID: "job-27", IDs: []uint64{1, 3, 5}})
	h.must(&TaskFailed{JobID: "job-27", Attempt: 1, TaskID: "src#0", Message: "wasm trap: unreachable"})
	h.must(&PlaceJob{JobID: "job-27", Attempt: 2, Deployment: map[string]string{"src#0": "w1", "sink#0": "w1"}})
	h.must(&CheckpointFailed{JobID: "job-27", ID: 5, Reason: "restore checkpoint 5: storage: not found: tenants/default/savepoints/job-27-5/src#0.json"})
	h.must(&TaskFailed{JobID: "job-27", Attempt: 2, TaskID: "src#0", Message: "restore checkpoint 5: storage: not found: tenants/default/savepoints/job-27-5/src#0.json"})
	h.must(&PlaceJob{JobID: "job-27", Attempt: 3, Deployment: map[string]string{"src#0": "w1", "sink#0": "w1"}})
	h.must(&TriggerCheckpoint{JobID: "job-27", Attempt: 3, ID: 6})

	// A swapped job: swap 1 refused; swap 2 completes at savepoint 1 and
	// rolls back when a task fails; attempt 2 swaps again (3) and the next
	// checkpoint disarms it; swap 4 fails in its prepare phase, swap 5 (a
	// configuration change) is being prepared.
	v1 := ModuleRef{Ref: "enrich@1", Name: "enrich", Version: 1, SHA256: digest("e1")}
	v2 := ModuleRef{Ref: "enrich@2", Name: "enrich", Version: 2, SHA256: digest("e2")}
	id := h.must(&SubmitJob{Tenant: DefaultTenant, Name: "swapped", Tasks: []string{"enrich#0"}, Modules: []ModuleRef{v1}}).(Job).ID // job-46
	h.must(&PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"enrich#0": "w2"}})
	swap := func(attempt int, from, to ModuleRef, fromConfig, toConfig string) {
		h.must(&BeginSwap{JobID: id, Attempt: attempt, Node: "enrich", From: from, To: to, FromConfig: []byte(fromConfig), ToConfig: []byte(toConfig)})
	}
	savepoint := func(attempt int, swap, sp uint64) {
		h.must(&TriggerCheckpoint{JobID: id, Attempt: attempt, ID: sp, Savepoint: true, Swap: swap})
		h.must(&CheckpointCompleted{JobID: id, Attempt: attempt, ID: sp, Savepoint: true, SwapPause: 4200 * time.Microsecond,
			Manifest: fmt.Sprintf("tenants/default/savepoints/%s-%d/_manifest.json", id, sp), Duration: 80 * time.Millisecond, FullSize: 300, IncrementalSize: 300})
	}
	swap(1, v1, v2, `{}`, `{"threshold":2}`)
	h.must(&EndSwap{JobID: id, SwapID: 1, State: SwapRefused, Reason: "node enrich: enrich@2 declares state counts as a map, enrich@1 as a value"})
	swap(1, v1, v2, `{}`, `{"threshold":2}`)
	savepoint(1, 2, 1)
	h.must(&TaskFailed{JobID: id, Attempt: 1, TaskID: "enrich#0", Message: "wasm trap: unreachable"})
	h.must(&PlaceJob{JobID: id, Attempt: 2, Deployment: map[string]string{"enrich#0": "w2"}})
	swap(2, v1, v2, `{}`, `{"threshold":3}`)
	savepoint(2, 3, 2)
	h.must(&TriggerCheckpoint{JobID: id, Attempt: 2, ID: 3})
	h.must(&CheckpointCompleted{JobID: id, Attempt: 2, ID: 3, Manifest: fmt.Sprintf("tenants/default/jobs/%s/chk/3/_manifest.json", id), Retain: 1})
	swap(2, v2, v1, `{"threshold":3}`, `{}`)
	h.must(&EndSwap{JobID: id, SwapID: 4, State: SwapFailed, Reason: "prepare timed out after 30s"})
	swap(2, v2, v2, `{"threshold":3}`, `{"threshold":4}`)
}

func TestSnapshotRestoreIdentical(t *testing.T) {
	h := newHarness(t)
	scenario(h)
	data := snapshotBytes(t, h.f)

	g := New()
	g.must(t, &CreateTenant{ID: "overwritten"}) // Restore replaces, not merges.
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if again := snapshotBytes(t, g); !bytes.Equal(again, data) {
		t.Fatalf("snapshot after restore differs:\n got %s\nwant %s", again, data)
	}
	queries := []struct {
		name string
		q    func(*FSM) any
	}{
		{"Tenants", func(f *FSM) any { return f.Tenants() }},
		{"Coordinators", func(f *FSM) any { return f.Coordinators() }},
		{"Modules(default)", func(f *FSM) any { return f.Modules(DefaultTenant) }},
		{"Modules(acme)", func(f *FSM) any { return f.Modules("acme") }},
		{"Workers", func(f *FSM) any { return f.Workers() }},
		{"AllJobs", func(f *FSM) any { return f.AllJobs() }},
		{"Jobs(acme)", func(f *FSM) any { return f.Jobs("acme") }},
		{"AppliedIndex", func(f *FSM) any { return f.AppliedIndex() }},
	}
	for _, q := range queries {
		if a, b := q.q(h.f), q.q(g); !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs after restore:\n got %+v\nwant %+v", q.name, b, a)
		}
	}
	if _, err := g.Tenant("overwritten"); !errors.Is(err, ErrTenantNotFound) {
		t.Errorf("Restore kept state it should have replaced")
	}

	// Both go on identically.
	for _, f := range []*FSM{h.f, g} {
		data := mustEncode(t, &SubmitJob{Tenant: DefaultTenant, Name: "after", Tasks: []string{"x"}}, t0)
		if _, err := f.ApplyCommand(h.index+1, data); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := h.f.MarshalState()
	b, _ := g.MarshalState()
	if !bytes.Equal(a, b) {
		t.Fatal("states diverged after restore")
	}
}

// The pinned modules, request id and savepoint of a job survive a snapshot.
func TestSnapshotKeepsSubmissionDetails(t *testing.T) {
	h := newHarness(t)
	h.must(&RegisterModule{Tenant: DefaultTenant, Name: "enrich", SHA256: digest("e1"), Size: 1})
	h.must(&SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"}, RequestID: "r1", FromSavepoint: "file:///sp",
		Modules: []ModuleRef{{Ref: "enrich", Name: "enrich", Version: 1, SHA256: digest("e1")}}})
	g := New()
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if a, b := h.f.AllJobs(), g.AllJobs(); !reflect.DeepEqual(a, b) || len(b) != 1 || len(b[0].Modules) != 1 || b[0].RequestID != "r1" {
		t.Fatalf("after restore %+v, want %+v", b, a)
	}
	// The request id still deduplicates after the restore.
	res, err := g.ApplyCommand(h.index+1, mustEncode(t, &SubmitJob{Tenant: DefaultTenant, Name: "j", Tasks: []string{"a"}, RequestID: "r1"}, t0))
	if err != nil || res.(Job).ID != "job-2" || len(g.AllJobs()) != 1 {
		t.Fatalf("resubmission after restore: %+v, %v", res, err)
	}
}

// must applies cmd at the next index (test helper on FSM).
func (f *FSM) must(t testing.TB, cmd Command) {
	t.Helper()
	if _, err := f.ApplyCommand(f.AppliedIndex()+1, mustEncode(t, cmd, t0)); err != nil {
		t.Fatal(err)
	}
}

func mustEncode(t testing.TB, cmd Command, at time.Time) []byte {
	t.Helper()
	data, err := Encode(cmd, at)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	h := newHarness(t)
	scenario(h)
	good, _ := h.f.MarshalState()
	edit := func(fn func(doc map[string]any)) string {
		var doc map[string]any
		if err := json.Unmarshal(good, &doc); err != nil {
			t.Fatal(err)
		}
		fn(doc)
		out, _ := json.Marshal(doc)
		return string(out)
	}
	// editSwapped edits the scenario's swapped job, the last submitted.
	editSwapped := func(fn func(j map[string]any)) string {
		return edit(func(d map[string]any) {
			jobs := d["jobs"].([]any)
			fn(jobs[len(jobs)-1].(map[string]any))
		})
	}
	swapOf := func(j map[string]any, i int) map[string]any { return j["swaps"].([]any)[i].(map[string]any) }
	tests := []struct {
		name    string
		data    string
		wantErr error
	}{
		{"empty", "", ErrCorruptSnapshot},
		{"not JSON", "snapshot", ErrCorruptSnapshot},
		{"truncated", string(good[:len(good)/2]), ErrCorruptSnapshot},
		{"newer format", edit(func(d map[string]any) { d["format"] = 2 }), ErrUnsupportedVersion},
		{"unknown field", edit(func(d map[string]any) { d["quotas"] = []any{} }), ErrCorruptSnapshot},
		{"trailing data", string(good) + `{"format":1}`, ErrCorruptSnapshot},
		{"repeated tenant", edit(func(d map[string]any) {
			d["tenants"] = append(d["tenants"].([]any), d["tenants"].([]any)[0])
		}), ErrCorruptSnapshot},
		{"module version gap", edit(func(d map[string]any) {
			var kept []any // enrich@2 without enrich@1
			for _, m := range d["modules"].([]any) {
				if m := m.(map[string]any); m["name"] != "enrich" || m["version"] != 1.0 {
					kept = append(kept, m)
				}
			}
			d["modules"] = kept
		}), ErrCorruptSnapshot},
		{"job of unknown tenant", edit(func(d map[string]any) {
			d["jobs"].([]any)[0].(map[string]any)["tenant"] = "nobody"
		}), ErrCorruptSnapshot},
		{"job in unknown state", edit(func(d map[string]any) {
			d["jobs"].([]any)[0].(map[string]any)["state"] = "SLEEPING"
		}), ErrCorruptSnapshot},
		{"worker in unknown state", edit(func(d map[string]any) {
			d["workers"].([]any)[0].(map[string]any)["state"] = "ZOMBIE"
		}), ErrCorruptSnapshot},
		{"swap beyond the last id", editSwapped(func(j map[string]any) { j["swap_seq"] = 4 }), ErrCorruptSnapshot},
		{"swap in unknown state", editSwapped(func(j map[string]any) { swapOf(j, 0)["state"] = "WOBBLY" }), ErrCorruptSnapshot},
		{"swaps out of order", editSwapped(func(j map[string]any) { swapOf(j, 1)["id"] = 1 }), ErrCorruptSnapshot},
		{"two swaps in flight", editSwapped(func(j map[string]any) { swapOf(j, 3)["state"] = "PREPARING" }), ErrCorruptSnapshot},
		{"an armed swap that is not the last", editSwapped(func(j map[string]any) { swapOf(j, 2)["armed"] = true }), ErrCorruptSnapshot},
		{"an armed swap being prepared", editSwapped(func(j map[string]any) { swapOf(j, 4)["armed"] = true }), ErrCorruptSnapshot},
		{"a swapping swap without its savepoint", editSwapped(func(j map[string]any) { swapOf(j, 4)["state"] = "SWAPPING" }), ErrCorruptSnapshot},
		{"a swap savepoint without its swap", edit(func(d map[string]any) {
			jobs := d["jobs"].([]any)
			for _, j := range jobs {
				if p, ok := j.(map[string]any)["pending_checkpoint"].(map[string]any); ok {
					p["swap"] = 1
				}
			}
		}), ErrCorruptSnapshot},
		{"overrides not sorted", editSwapped(func(j map[string]any) {
			o := j["overrides"].([]any)
			j["overrides"] = append(o, o[0])
		}), ErrCorruptSnapshot},
		{"too many swaps", editSwapped(func(j map[string]any) {
			var swaps []any
			for i := range MaxSwapHistory + 1 {
				swaps = append(swaps, map[string]any{"id": i + 1, "node": "n", "attempt": 1, "state": "REFUSED", "began": "2025-03-01T12:00:00Z",
					"from": map[string]any{"ref": "a", "name": "a", "version": 1, "sha256": ""}, "to": map[string]any{"ref": "a", "name": "a", "version": 1, "sha256": ""}})
			}
			j["swaps"], j["swap_seq"] = swaps, MaxSwapHistory+1
		}), ErrCorruptSnapshot},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			f.must(t, &CreateTenant{ID: "kept"})
			before, _ := f.MarshalState()
			err := f.Restore(io.NopCloser(strings.NewReader(tc.data)))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Restore: %v, want %v", err, tc.wantErr)
			}
			if after, _ := f.MarshalState(); !bytes.Equal(before, after) {
				t.Fatal("failed restore changed the state")
			}
		})
	}
}

// randomLog builds a log of n commands from a seeded generator: valid ones
// and ones the FSM refuses (stale attempts, dead workers, unknown ids, bad
// placements), so that both paths are replayed. It follows the state on a
// scratch FSM so that most decisions are plausible.
func randomLog(seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tenants := []string{DefaultTenant, "acme", "beta"}
	workers := []string{"w0", "w1", "w2", "w3"}
	scratch := New()
	now := t0
	var log [][]byte
	add := func(cmd Command) {
		now = now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		data, err := Encode(cmd, now)
		if err != nil {
			panic(err)
		}
		log = append(log, data)
		_, _ = scratch.ApplyCommand(uint64(len(log)), data)
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	likely := func() bool { return rng.IntN(10) < 8 }
	add(&CreateTenant{ID: "acme"})
	add(&CreateTenant{ID: "beta"})
	for len(log) < n {
		var jobs []Job // mostly the live ones
		for _, j := range scratch.AllJobs() {
			if !j.State.Terminal() || !likely() {
				jobs = append(jobs, j)
			}
		}
		if len(jobs) == 0 {
			jobs = []Job{{ID: "job-0", Tasks: []string{"t0"}}}
		}
		j := jobs[rng.IntN(len(jobs))]
		attempt := j.Attempt
		if !likely() {
			attempt = rng.IntN(4)
		}
		op := rng.IntN(23)
		// Task reports, finishing a job and checkpoint commands need a
		// running job (with a checkpoint in flight to complete or fail
		// one): often pick one.
		if op >= 13 || (op >= 7 && op <= 9 || op == 12) && rng.IntN(2) == 0 {
			for _, r := range scratch.AllJobs() {
				if r.State == JobRunning && (op < 15 || op > 16 || r.PendingCheckpoint != nil) && likely() {
					j, attempt = r, r.Attempt
					break
				}
			}
		}
		if op >= 20 { // drive a swap in flight or an armed one, if any
			for _, r := range scratch.AllJobs() {
				if n := len(r.Swaps); n > 0 && (!r.Swaps[n-1].State.Terminal() || r.Swaps[n-1].Armed) && r.State == JobRunning {
					j, attempt = r, r.Attempt
					break
				}
			}
		}
		task := pick(j.Tasks)
		if !likely() {
			task = "t9"
		}
		switch op {
		case 3:
			add(&RegisterCoordinator{ID: pick([]string{"c1", "c2", "c3"}), RaftAddress: "127.0.0.1:9000", APIAddress: "127.0.0.1:8000"})
		case 0:
			add(&RegisterWorker{ID: pick(workers), Address: fmt.Sprintf("127.0.0.1:%d", 7000+rng.IntN(4)),
				Slots: 1 + rng.IntN(4), Incarnation: fmt.Sprint(rng.IntN(3))})
		case 1:
			add(&WorkerDown{ID: pick(workers), Reason: "lost"})
		case 2:
			tasks := []string{"t0"}
			for i := 1; i < 1+rng.IntN(4); i++ {
				tasks = append(tasks, fmt.Sprintf("t%d", i))
			}
			add(&SubmitJob{Numbered: rng.IntN(4) != 0, Tenant: pick(tenants), Name: fmt.Sprint("job", rng.IntN(100)), Spec: []byte{byte(rng.IntN(256))}, Tasks: tasks})
		case 4, 5, 6:
			dep := map[string]string{}
			for _, task := range j.Tasks {
				dep[task] = pick(workers)
			}
			if !likely() {
				dep["t9"] = pick(workers)
			}
			add(&PlaceJob{JobID: j.ID, Attempt: max(1, attempt+1), Deployment: dep})
		case 7, 8:
			add(&TaskFinished{JobID: j.ID, Attempt: max(1, attempt), TaskID: task})
		case 9:
			add(&TaskFailed{JobID: j.ID, Attempt: max(1, attempt), TaskID: task, Message: "boom"})
		case 10:
			add(&JobWaiting{JobID: j.ID, Message: fmt.Sprintf("needs %d", rng.IntN(5))})
		case 11:
			if likely() {
				add(&RegisterModule{Tenant: pick(tenants), Name: pick([]string{"enrich", "stats"}), SHA256: digest(fmt.Sprint(rng.IntN(3))), Size: int64(rng.IntN(1 << 20))})
			} else {
				add(&CancelJob{Tenant: pick(tenants), JobID: j.ID})
			}
		case 12:
			if rng.IntN(3) == 0 {
				add(&FailJob{JobID: j.ID, Message: "gave up"})
			} else {
				add(&FinishJob{JobID: j.ID, Attempt: max(1, attempt)})
			}
		case 13, 14:
			id := j.CheckpointSeq + 1
			if !likely() {
				id = uint64(rng.IntN(4)) + 1
			}
			trigger := &TriggerCheckpoint{JobID: j.ID, Attempt: max(1, attempt), ID: id, Savepoint: rng.IntN(4) == 0}
			if s, ok := j.SwapInFlight(); ok && likely() {
				trigger.Savepoint, trigger.Swap = true, s.ID
			}
			add(trigger)
		case 15, 16:
			id := uint64(rng.IntN(4)) + 1
			savepoint := rng.IntN(4) == 0
			if p := j.PendingCheckpoint; p != nil && likely() {
				id, savepoint = p.ID, p.Savepoint
			}
			if op == 15 {
				add(&CheckpointFailed{JobID: j.ID, ID: id, Reason: "timed out"})
			} else {
				add(&CheckpointCompleted{JobID: j.ID, Attempt: max(1, attempt), ID: id, Savepoint: savepoint,
					Manifest: fmt.Sprintf("chk/%d", id), Retain: 1 + rng.IntN(3), FullSize: int64(rng.IntN(1000)),
					SwapPause: time.Duration(rng.IntN(100)) * time.Millisecond})
			}
		case 17:
			if len(j.CheckpointsToDelete) > 0 && likely() {
				add(&CheckpointsDeleted{JobID: j.ID, IDs: j.CheckpointsToDelete[:1+rng.IntN(len(j.CheckpointsToDelete))]})
			} else if c, ok := j.LatestCompleted(); ok {
				add(&CheckpointFailed{JobID: j.ID, ID: c.ID, Reason: "restore checkpoint: corrupt"})
			} else {
				add(&CheckpointsDeleted{JobID: j.ID, IDs: []uint64{uint64(rng.IntN(3)) + 1}})
			}
		case 19:
			// A module of the job's tenant, mostly; another's is refused.
			to := ModuleRef{Ref: "enrich@1", Name: "enrich", Version: 1, SHA256: digest("0")}
			if ms := scratch.Modules(j.Tenant); len(ms) > 0 && likely() {
				m := ms[rng.IntN(len(ms))]
				to = ModuleRef{Ref: m.Ref(), Name: m.Name, Version: m.Version, SHA256: m.SHA256}
			}
			add(&BeginSwap{JobID: j.ID, Attempt: max(1, attempt), Node: pick([]string{"enrich", "stats"}), From: to, To: to,
				ToConfig: fmt.Appendf(nil, `{"n":%d}`, rng.IntN(3))})
		case 20, 21, 22:
			// Drive the swap in flight, mostly towards completion, so that
			// swaps complete, get armed and roll back in the log too.
			s, ok := j.SwapInFlight()
			switch p := j.PendingCheckpoint; {
			case len(j.Swaps) > 0 && j.Swaps[len(j.Swaps)-1].Armed && likely():
				add(&TaskFailed{JobID: j.ID, Attempt: max(1, attempt), TaskID: task, Message: "trap after the swap"})
			case ok && s.State == SwapPreparing && p == nil && rng.IntN(3) > 0:
				add(&TriggerCheckpoint{JobID: j.ID, Attempt: max(1, attempt), ID: j.CheckpointSeq + 1, Savepoint: true, Swap: s.ID})
			case ok && s.State == SwapSwapping && p != nil && rng.IntN(3) > 0:
				add(&CheckpointCompleted{JobID: j.ID, Attempt: max(1, attempt), ID: p.ID, Savepoint: true, Manifest: fmt.Sprintf("sp/%d", p.ID),
					SwapPause: time.Duration(rng.IntN(100)) * time.Millisecond})
			default:
				id := uint64(rng.IntN(3)) + 1
				if ok && likely() {
					id = s.ID
				}
				add(&EndSwap{JobID: j.ID, SwapID: id, State: SwapState(pick([]string{"REFUSED", "FAILED"})), Reason: "refused"})
			}
		case 18:
			token := fmt.Sprint("tok", rng.IntN(8))
			switch rng.IntN(6) {
			case 0:
				add(&CreateToken{Token: Token{ID: token, Tenant: pick(tenants), Role: Role(pick([]string{"admin", "developer", "viewer"})),
					Hash: digest(token), Expires: now.Add(time.Duration(rng.IntN(3)) * time.Hour)}})
			case 1:
				add(&RevokeToken{ID: token})
			case 2:
				add(&SetQuota{Tenant: pick(tenants), Quota: Quota{Slots: rng.IntN(8), Jobs: rng.IntN(4), CPUShare: rng.IntN(3)}})
			case 3:
				add(&RecordAudit{Entry: AuditEntry{TokenID: token, Tenant: pick(tenants), Role: RoleDeveloper, Method: "SubmitJob", Outcome: "ok"}})
			case 4:
				add(&CreateTenant{ID: "gamma"})
			case 5:
				add(&DeleteTenant{ID: pick([]string{"gamma", "beta"})})
			}
		}
	}
	return log
}

// replay applies log entries from index first on and counts the commands
// applied by type.
func replay(t testing.TB, f *FSM, log [][]byte, first uint64) (applied map[CommandType]int, refused int) {
	t.Helper()
	applied = map[CommandType]int{}
	for i, data := range log {
		if _, err := f.ApplyCommand(first+uint64(i), data); err != nil {
			refused++
			continue
		}
		env, _ := Decode(data)
		applied[env.Type]++
	}
	return applied, refused
}

func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			log := randomLog(seed, 2000)
			a, b := New(), New()
			applied, refused := replay(t, a, log, 1)
			replay(t, b, log, 1)
			sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
			if !bytes.Equal(sa, sb) {
				t.Fatal("same log, different snapshots")
			}
			// A member that restored a snapshot taken half-way and replayed
			// the rest ends in the same state.
			half := len(log) / 2
			c := New()
			replay(t, c, log[:half], 1)
			d := New()
			if err := d.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, c)))); err != nil {
				t.Fatal(err)
			}
			replay(t, d, log[half:], uint64(half)+1)
			if sd := snapshotBytes(t, d); !bytes.Equal(sa, sd) {
				t.Fatal("restore + replay differs from a full replay")
			}
			var states = map[JobState]int{}
			swaps := map[SwapState]int{}
			for _, j := range a.AllJobs() {
				states[j.State]++
				for _, s := range j.Swaps {
					swaps[s.State]++
				}
			}
			t.Logf("applied %v; %d refused; jobs by state %v; swaps by state %v", applied, refused, states, swaps)
			if swaps[SwapSwapped]+swaps[SwapRolledBack] == 0 {
				t.Error("the random log never completes a swap")
			}
			for typ := range newCommand {
				if applied[typ] == 0 {
					t.Errorf("the random log never applies %s", typ)
				}
			}
		})
	}
}

// TestGolden pins the command and snapshot formats: testdata/log.golden is
// the scenario's log, one encoded command a line, and testdata/state.golden
// the state after it. A change that alters either needs a format version
// bump (and a reader for the old one); rewrite them with -update only then.
func TestGolden(t *testing.T) {
	h := newHarness(t)
	scenario(h)
	var logText bytes.Buffer
	for _, e := range h.log {
		logText.Write(e)
		logText.WriteByte('\n')
	}
	state, _ := h.f.MarshalState()
	var stateText bytes.Buffer
	if err := json.Indent(&stateText, state, "", "  "); err != nil {
		t.Fatal(err)
	}
	stateText.WriteByte('\n')
	logPath := filepath.Join("testdata", "log.golden")
	statePath := filepath.Join("testdata", "state.golden")
	if *update {
		if err := os.WriteFile(logPath, logText.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(statePath, stateText.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantLog, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	wantState, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(logText.Bytes(), wantLog) {
		t.Errorf("encoded commands differ from %s (run with -update after a deliberate format change):\n%s", logPath, logText.Bytes())
	}
	if !bytes.Equal(stateText.Bytes(), wantState) {
		t.Errorf("state differs from %s (run with -update after a deliberate format change):\n%s", statePath, stateText.Bytes())
	}

	// The committed log replays to the committed state, and the committed
	// state restores: old logs and snapshots stay readable.
	f := New()
	for i, line := range bytes.Split(bytes.TrimSpace(wantLog), []byte("\n")) {
		_, _ = f.ApplyCommand(uint64(i+1), line)
	}
	got, _ := f.MarshalState()
	var compact bytes.Buffer
	if err := json.Compact(&compact, wantState); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, compact.Bytes()) {
		t.Errorf("replaying %s does not give %s", logPath, statePath)
	}
	g := New()
	if err := g.UnmarshalState(wantState); err != nil {
		t.Fatalf("restore %s: %v", statePath, err)
	}
}

// TestGoldenBeforeCheckpoints: a log and a snapshot written before the
// checkpoint commands existed still replay and restore to the same state,
// byte for byte (the checkpoint fields are absent when unused), so members
// of different versions agree.
func TestGoldenBeforeCheckpoints(t *testing.T) { testGoldenBefore(t, "checkpoints") }

// TestGoldenBeforeSwaps: the same for the log and snapshot written before
// hot swaps (the swap fields are absent when unused).
func TestGoldenBeforeSwaps(t *testing.T) { testGoldenBefore(t, "swaps") }

func testGoldenBefore(t *testing.T, what string) {
	wantLog, err := os.ReadFile(filepath.Join("testdata", "log-before-"+what+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	wantState, err := os.ReadFile(filepath.Join("testdata", "state-before-"+what+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	for i, line := range bytes.Split(bytes.TrimSpace(wantLog), []byte("\n")) {
		_, _ = f.ApplyCommand(uint64(i+1), line)
	}
	got, _ := f.MarshalState()
	var compact bytes.Buffer
	if err := json.Compact(&compact, wantState); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, compact.Bytes()) {
		t.Errorf("replaying the log from before %s gives another state:\n%s", what, got)
	}
	g := New()
	if err := g.UnmarshalState(wantState); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if again, _ := g.MarshalState(); !bytes.Equal(again, compact.Bytes()) {
		t.Errorf("the snapshot from before %s does not marshal back to itself:\n%s", what, again)
	}
}

// TestGoldenNumberedJobs: after the committed log (from before jobs were
// numbered: their ids are log indexes), numbered submissions count from
// job-1, and the count survives a snapshot. The wire names are written
// out, since logs and snapshots that hold them must keep replaying.
func TestGoldenNumberedJobs(t *testing.T) {
	wantLog, err := os.ReadFile(filepath.Join("testdata", "log.golden"))
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	for i, line := range bytes.Split(bytes.TrimSpace(wantLog), []byte("\n")) {
		_, _ = f.ApplyCommand(uint64(i+1), line)
	}
	submit := func(f *FSM, name string) string {
		t.Helper()
		line := `{"v":1,"type":"submit_job","at":1740830500000,"body":{"numbered":true,"tenant":"default","name":"` + name + `","tasks":["t0"]}}`
		res, err := f.ApplyCommand(f.AppliedIndex()+1, []byte(line))
		if err != nil {
			t.Fatal(err)
		}
		return res.(Job).ID
	}
	if id := submit(f, "a"); id != "job-1" {
		t.Errorf("first numbered job %s, want job-1", id)
	}
	state, _ := f.MarshalState()
	if !bytes.Contains(state, []byte(`"job_seq":1`)) {
		t.Errorf("the snapshot lacks the count: %s", state)
	}
	g := New()
	if err := g.UnmarshalState(state); err != nil {
		t.Fatal(err)
	}
	if id := submit(g, "b"); id != "job-2" {
		t.Errorf("numbered job after a restore %s, want job-2", id)
	}
	enc, err := Encode(&SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "c", Tasks: []string{"t0"}}, t0)
	if err != nil || !bytes.Contains(enc, []byte(`"numbered":true`)) {
		t.Errorf("encoded %s, %v", enc, err)
	}
}
