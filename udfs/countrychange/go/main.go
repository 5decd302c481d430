// Command countrychange is the "country-change" example operator as a Go
// Wasm guest: a card-fraud rule that alerts when a card is used in two
// countries within a window of event time (see package detector for the
// configuration and the exact rules). It keeps each card's latest
// transaction in keyed state and clears it with an event-time timer, so it
// needs a keyed node (key_by the card).
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o country-change-go.wasm ./udfs/countrychange/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed"
	"github.com/eddy-stream/eddy/udfs/countrychange/detector"
)

type countryChange struct {
	config  detector.Config
	last    *keyed.Value
	scratch []byte // reused: the transaction's unescaped strings
	state   []byte // reused: the encoded state
	out     []byte // reused: the alert (Emit copies it)
}

func (o *countryChange) Open(config []byte) error {
	c, err := detector.Parse(config)
	if err != nil {
		return err
	}
	o.config = c
	o.last = keyed.ValueState(detector.StateName)
	return nil
}

func (o *countryChange) Process(r *eddy.Record) error {
	if r.Timestamp == eddy.NoTimestamp {
		return nil
	}
	txn, scratch, ok := detector.ParseTxn(r.Value, o.scratch)
	o.scratch = scratch
	if !ok {
		return nil
	}
	stored, have := o.last.Get()
	var last detector.Last
	if have {
		if last, have = detector.DecodeLast(stored); !have {
			return detector.ErrBadState(stored)
		}
	}
	step := o.config.Decide(last, have, txn.Country, r.Timestamp)
	if step.Alert {
		o.out = detector.AppendAlert(o.out[:0], txn.Card, step, r.Timestamp)
		eddy.Emit(eddy.Record{Key: r.Key, Value: o.out, Timestamp: r.Timestamp})
	}
	if step.Replace {
		o.state = detector.AppendLast(o.state[:0], detector.Last{Ts: r.Timestamp, Country: txn.Country})
		o.last.Put(o.state)
		if step.HasOld {
			keyed.DeleteEventTimeTimer(step.OldTimer)
		}
		keyed.RegisterEventTimeTimer(step.NewTimer)
	}
	return nil
}

// OnTimer clears the card's state when its cleanup timer fires, unless a
// later transaction has replaced the one that set the timer.
func (o *countryChange) OnTimer(t keyed.Timer) error {
	stored, have := o.last.Get()
	if !have {
		return nil
	}
	last, ok := detector.DecodeLast(stored)
	if !ok {
		return detector.ErrBadState(stored)
	}
	if o.config.Expired(last, t.Timestamp) {
		o.last.Clear()
	}
	return nil
}

func (o *countryChange) Close() error { return nil }

func init() { eddy.Register(&countryChange{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
