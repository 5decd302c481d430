package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

// TestEngineCloseStopsRunningGuests: Close must not wait for guests that
// would run until their deadline (a minute here), whether they loop or
// sleep. Whether Close comes before or during the call, the call must end
// promptly with ErrClosed.
func TestEngineCloseStopsRunningGuests(t *testing.T) {
	e := newTestEngine(t, Config{CallTimeout: time.Minute})
	type result struct {
		module string
		err    error
	}
	one := []abi.Record{{Key: []byte("k"), Value: []byte("v")}}
	results := make(chan result, 2)
	started := make(chan struct{}, 2)
	for _, name := range []string{"loop", "sleep"} {
		i := newTestInstance(t, loadFixture(t, e, name), "job/"+name+"[0]")
		if err := i.Open(nil); err != nil {
			t.Fatal(err)
		}
		go func() {
			started <- struct{}{}
			results <- result{name, i.Process(one, nil)}
		}()
	}
	<-started
	<-started
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for range 2 {
		select {
		case r := <-results:
			if !errors.Is(r.err, ErrClosed) {
				t.Errorf("%s: Process = %v, want ErrClosed", r.module, r.err)
			}
		case <-deadline:
			t.Fatal("a guest is still running 20s after Engine.Close")
		}
	}
}
