// Command counter-v2 is version 2 of the "counter" example operator as a
// Go Wasm guest, the same operator as udfs/counter/c-v2 (keep them alike):
// it counts records per key like version 1 (udfs/counter/go, package
// counting) but stores the count as JSON text, {"n":N}, in schema version
// 1 of the "count" state, converting a count version 1 wrote (schema 0, a
// u64) on read, and emits {"key":K,"count":N,"v":2}.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter-v2-go.wasm ./udfs/counter/go-v2
package main

import (
	"errors"
	"fmt"
	"strconv"

	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed"
	_ "github.com/eddy-stream/eddy/sdk/go/keyed/schema" // ABI version 4
	"github.com/eddy-stream/eddy/udfs/counter/counting"
)

// The schema versions of "count".
const (
	countU64  = 0 // version 1's: counting.Append
	countJSON = 1 // {"n":N}
)

type counter struct {
	count *keyed.Value
	state []byte // reused: the stored count
	out   []byte // reused: the output value (Emit copies it)
}

func (c *counter) Open(config []byte) error {
	cfg, err := counting.ParseConfig(config)
	if err != nil {
		return err
	}
	if cfg.IdleMs > 0 {
		return errors.New("counter v2: config: unknown key idle_ms")
	}
	c.count = keyed.ValueState(counting.StateName, keyed.Schema(countJSON))
	return nil
}

// decode reads the stored count in either schema.
func decode(b []byte, schema uint32, ok bool) (uint64, error) {
	switch {
	case !ok:
		return 0, nil
	case schema == countU64:
		return counting.Decode(b, true)
	case schema == countJSON:
		digits, found := cutJSON(b)
		if n, err := strconv.ParseUint(string(digits), 10, 64); found && err == nil && (len(digits) == 1 || digits[0] != '0') {
			return n, nil
		}
		return 0, fmt.Errorf("counter v2: the stored count (schema 1) is not {\"n\":N}: %.40q", b)
	}
	return 0, fmt.Errorf("counter v2: the stored count has schema version %d, which this version does not know", schema)
}

// cutJSON returns N of {"n":N}.
func cutJSON(b []byte) ([]byte, bool) {
	const open = `{"n":`
	if len(b) < len(open)+2 || string(b[:len(open)]) != open || b[len(b)-1] != '}' {
		return nil, false
	}
	return b[len(open) : len(b)-1], true
}

func (c *counter) Process(r *eddy.Record) error {
	n, err := decode(c.count.GetSchema())
	if err != nil {
		return err
	}
	n++
	c.state = strconv.AppendUint(append(c.state[:0], `{"n":`...), n, 10)
	c.state = append(c.state, '}')
	c.count.Put(c.state)
	c.out = counting.AppendJSON(c.out[:0], r.Key, n)
	c.out = append(c.out[:len(c.out)-1], `,"v":2}`...)
	eddy.Emit(eddy.Record{Key: r.Key, Value: c.out, Timestamp: r.Timestamp})
	return nil
}

func (c *counter) Close() error { return nil }

func init() { eddy.Register(&counter{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
