// Command regularjoin is the "regular-join" example operator as a Go Wasm
// guest: a two-input keyed operator (package co, ABI version 5), the
// unwindowed inner join of Nexmark q3 (persons by id with auctions by
// seller). Every record of either input is kept in list state under its
// key; a record that arrives joins every record of the other input already
// kept for the key, so each pair of a left and a right record of the same
// key is emitted once, as {"left":<left value>,"right":<right value>},
// whichever arrives first.
//
// With report_at (ms) in the config, the first record of a key sets an
// event-time timer at report_at; when it fires the operator emits
// {"key":"<key>","left":<n>,"right":<n>}, the records each input had
// for the key, and clears the key's state (a cleanup timer: Flink's q3
// keeps its state forever).
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o regular-join-go.wasm ./udfs/regularjoin/go
package main

import (
	"encoding/json"
	"fmt"
	"strconv"

	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed"
	"github.com/eddy-stream/eddy/sdk/go/keyed/co"
)

type join struct {
	reportAt int64
	sides    [2]*keyed.List // co.Left, co.Right
	out      []byte
}

func (j *join) Open(config []byte) error {
	var cfg struct {
		ReportAt int64 `json:"report_at"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("regular-join: config: %w", err)
	}
	j.reportAt = cfg.ReportAt
	j.sides = [2]*keyed.List{keyed.ListState("left"), keyed.ListState("right")}
	return nil
}

func (j *join) ProcessLeft(r *eddy.Record) error  { return j.process(co.Left, r) }
func (j *join) ProcessRight(r *eddy.Record) error { return j.process(co.Right, r) }

func (j *join) process(side int, r *eddy.Record) error {
	mine, other := j.sides[side], j.sides[1-side]
	if j.reportAt > 0 && mine.Get() == nil && other.Get() == nil {
		keyed.RegisterEventTimeTimer(j.reportAt)
	}
	for _, o := range other.Get() {
		l, rt := r.Value, o
		if side == co.Right {
			l, rt = o, r.Value
		}
		j.out = append(append(append(append(append(j.out[:0], `{"left":`...), l...), `,"right":`...), rt...), '}')
		eddy.Emit(eddy.Record{Key: r.Key, Value: j.out, Timestamp: r.Timestamp})
	}
	mine.Add(r.Value)
	return nil
}

// OnTimer reports the key's records and forgets them.
func (j *join) OnTimer(t keyed.Timer) error {
	nl, nr := len(j.sides[co.Left].Get()), len(j.sides[co.Right].Get())
	j.out = append(j.out[:0], `{"key":`...)
	j.out = strconv.AppendQuote(j.out, string(t.Key))
	j.out = append(strconv.AppendInt(append(j.out, `,"left":`...), int64(nl), 10), `,"right":`...)
	j.out = append(strconv.AppendInt(j.out, int64(nr), 10), '}')
	eddy.Emit(eddy.Record{Key: t.Key, Value: j.out, Timestamp: t.Timestamp})
	j.sides[co.Left].Clear()
	j.sides[co.Right].Clear()
	return nil
}

func (j *join) Close() error { return nil }

func init() { co.Register(&join{}) }

func main() {}
