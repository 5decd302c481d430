package dataflow

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
	"github.com/eddy-stream/eddy/storage"
)

// fakeCapture is a stateCapture whose upload waits for hold.
type fakeCapture struct {
	hold   <-chan struct{}
	mu     *sync.Mutex
	events *[]string
	name   string
	// started, when set, is closed once the upload began.
	started chan struct{}
}

func (c *fakeCapture) upload(ctx context.Context, _ storage.Store, _ string) (json.RawMessage, error) {
	if c.started != nil {
		close(c.started)
	}
	select {
	case <-c.hold:
	case <-ctx.Done():
		c.record("canceled " + c.name)
		return nil, ctx.Err()
	}
	c.record("uploaded " + c.name)
	return json.RawMessage(`{"files":[{"key":"shared/` + c.name + `","size":1}]}`), nil
}

func (c *fakeCapture) discard() { c.record("discarded " + c.name) }

func (c *fakeCapture) record(e string) {
	c.mu.Lock()
	*c.events = append(*c.events, e)
	c.mu.Unlock()
}

// TestUploadsBound: at most maxUploads snapshots between capture and the
// end of their upload; uploads in checkpoint order, a listening source
// told before the ack; stop without finishing cancels the upload in
// flight and discards the ones waiting.
func TestUploadsBound(t *testing.T) {
	st, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	acks := make(chan Ack, 8)
	u := newUploads(context.Background(), st, "p", func(a Ack) { record("ack " + a.Task); acks <- a },
		func(id int64, _ []byte) { record("taken") }, slog.Default())

	done := context.Background()
	full, cancel := context.WithCancel(context.Background())
	cancel() // reserve with it succeeds only if there is room at once
	hold := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
	bStarted := make(chan struct{})
	snap := func(id int64, name string) *pendingSnapshot {
		return &pendingSnapshot{id: id, start: time.Now(), manifest: checkpoint.TaskManifest{Version: checkpoint.Version, Checkpoint: id, Task: name,
			Nodes: map[string]checkpoint.NodeSnapshot{"n": {}}, Source: &checkpoint.SourceSnapshot{Node: "src", Position: []byte{byte(id)}}},
			states: []nodeCapture{{node: "n", capture: &fakeCapture{hold: hold[name], mu: &mu, events: &events, name: name, started: map[string]chan struct{}{"b": bStarted}[name]}}}}
	}
	for i, name := range []string{"a", "b"} {
		if err := u.reserve(done, int64(i+1)); err != nil {
			t.Fatal(err)
		}
		u.start(snap(int64(i+1), name))
	}
	if err := u.reserve(full, 3); err == nil {
		t.Fatal("a third snapshot was let in with two uploads in flight")
	}
	close(hold["a"])
	if a := <-acks; a.CheckpointID != 1 || a.Task != "a" || a.FullSize != 1 || a.Incremental != 1 {
		t.Fatalf("ack %+v", a)
	}
	// The slot is given back after the ack.
	deadline := time.Now().Add(10 * time.Second)
	for u.reserve(full, 3) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no room after an upload ended")
		}
		time.Sleep(time.Millisecond)
	}
	u.start(snap(3, "c"))
	// b's upload must have begun (it is held) for stop to cancel it, not
	// discard it: the uploader picks it up after a's ack.
	select {
	case <-bStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("b's upload never began")
	}
	u.stop(false) // b is uploading (held), c waits
	mu.Lock()
	defer mu.Unlock()
	want := []string{"uploaded a", "taken", "ack a", "canceled b", "discarded c"}
	if len(events) != len(want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %q, want %q", events, want)
		}
	}
}
