// Command counter is the "counter" example operator as a Go Wasm guest: a
// running count of records per key in keyed state, and with idle_ms a
// report of the keys that went quiet, on processing-time timers (see
// package counting for the configuration, the output and the state
// encoding). It needs a keyed node.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter-go.wasm ./udfs/counter/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
)

type counter struct {
	config counting.Config
	count  *keyed.Value
	idle   *keyed.Value // with idle_ms: the key's deadline
	state  []byte       // reused: the stored count
	out    []byte       // reused: the output value (Emit copies it)
}

func (c *counter) Open(config []byte) error {
	cfg, err := counting.ParseConfig(config)
	if err != nil {
		return err
	}
	c.config = cfg
	c.count = keyed.ValueState(counting.StateName)
	if cfg.IdleMs > 0 {
		c.idle = keyed.ValueState(counting.IdleStateName)
	}
	return nil
}

func (c *counter) Process(r *eddy.Record) error {
	n, err := counting.Decode(c.count.Get())
	if err != nil {
		return err
	}
	n++
	c.state = counting.Append(c.state[:0], n)
	c.count.Put(c.state)
	if c.idle != nil {
		if err := c.touch(); err != nil {
			return err
		}
	}
	c.out = counting.AppendJSON(c.out[:0], r.Key, n)
	eddy.Emit(eddy.Record{Key: r.Key, Value: c.out, Timestamp: r.Timestamp})
	return nil
}

// touch moves the key's idle timer to now + idle_ms.
func (c *counter) touch() error {
	deadline := c.config.Deadline(keyed.ProcessingTime())
	old, had := c.idle.Get()
	if had {
		prev, err := counting.Decode(old, true)
		if err != nil {
			return err
		}
		if int64(prev) == deadline {
			return nil
		}
		keyed.DeleteProcessingTimeTimer(int64(prev))
	}
	keyed.RegisterProcessingTimeTimer(deadline)
	c.state = counting.Append(c.state[:0], uint64(deadline))
	c.idle.Put(c.state)
	return nil
}

// OnTimer reports the key idle when the timer of its last record fires.
func (c *counter) OnTimer(t keyed.Timer) error {
	if c.idle == nil || t.Kind != keyed.ProcessingTimeTimer {
		return nil
	}
	stored, had := c.idle.Get()
	if !had {
		return nil
	}
	deadline, err := counting.Decode(stored, true)
	if err != nil || int64(deadline) != t.Timestamp {
		return err
	}
	n, err := counting.Decode(c.count.Get())
	if err != nil {
		return err
	}
	c.idle.Clear()
	c.out = counting.AppendIdleJSON(c.out[:0], t.Key, n)
	eddy.Emit(eddy.Record{Key: t.Key, Value: c.out, Timestamp: eddy.NoTimestamp})
	return nil
}

func (c *counter) Close() error { return nil }

func init() { eddy.Register(&counter{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
