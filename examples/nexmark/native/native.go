// Package native is the user logic of the Nexmark queries (udfs/nexmark/c)
// as native Go operators: what `make bench-nexmark` runs in place of the
// Wasm module to show what the Wasm boundary costs. It mirrors nexmark.c
// query by query, state encoding and timers included; change both
// together. The same reference (examples/nexmark) checks both.
package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/eddy-stream/eddy/abi/jsonscan"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

// Config is a node's config: {"query": …, "window_ms": …, "key_window_ms": …}.
type Config struct {
	Query    string
	WindowMs int64
}

// ParseConfig reads a wasm node's config as nexmark.c does.
func ParseConfig(cfg map[string]any) (Config, error) {
	var c Config
	for k, v := range cfg {
		switch k {
		case "query":
			s, ok := v.(string)
			if !ok || !queries[s] {
				return c, fmt.Errorf("nexmark: config: query %v is not one of bids, persons, auctions, q0, q1, q2, q4avg, q5, q7, q8, q12", v)
			}
			c.Query = s
		case "window_ms", "key_window_ms":
			n, ok := asWhole(v)
			if !ok || n < 1 || c.WindowMs != 0 {
				return c, fmt.Errorf("nexmark: config: %s must be a whole number of milliseconds from 1 to 2^53", k)
			}
			c.WindowMs = n
		default:
			return c, fmt.Errorf("nexmark: config: unknown key %s", k)
		}
	}
	if c.Query == "" {
		return c, errors.New("nexmark: config: query is missing")
	}
	if (c.Query == "q7" || c.Query == "q8" || c.Query == "q12") && c.WindowMs == 0 {
		return c, fmt.Errorf("nexmark: config: %s needs window_ms", c.Query)
	}
	return c, nil
}

func asWhole(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case uint64:
		return int64(n), n < 1<<53
	case float64:
		return int64(n), n == math.Trunc(n) && n <= 1<<53
	}
	return 0, false
}

var queries = map[string]bool{"bids": true, "persons": true, "auctions": true, "q0": true, "q1": true, "q2": true,
	"q4avg": true, "q5": true, "q7": true, "q8": true, "q12": true}

// New is the operator of a config.
func New(c Config) stream.Operator { return &operator{cfg: c} }

type operator struct {
	cfg   Config
	store state.Store
	out   []byte
	st    []byte
	nowFn func() int64
}

func (o *operator) Open(_ context.Context, info stream.TaskInfo) error {
	switch o.cfg.Query {
	case "q4avg", "q5", "q7", "q8", "q12":
		st, ok := info.State.(state.Store)
		if !ok {
			return fmt.Errorf("nexmark: %s: keyed state needs key_by on node %s", o.cfg.Query, info.Node)
		}
		o.store = st
	}
	o.nowFn = info.Now
	return nil
}

func (o *operator) Finish(context.Context, *stream.Batch) error { return nil }

// ReleasesInput: out.Add copies; the stateful queries are left out until
// what they keep of a record is audited.
func (o *operator) ReleasesInput() bool { return o.store == nil }
func (o *operator) Close() error        { return nil }

func (o *operator) Process(_ context.Context, in, out *stream.Batch) error {
	for i := range in.Records {
		r := &in.Records[i]
		var err error
		switch o.cfg.Query {
		case "q4avg":
			err = o.q4avg(r, out)
		case "q5":
			err = o.q5(r)
		case "q7":
			err = o.q7(r)
		case "q8":
			err = o.q8(r, out)
		case "q12":
			err = o.q12(r, out)
		default:
			err = o.stateless(r, out)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func floorTo(ts, size int64) int64 { return ts - ((ts%size)+size)%size }

// Events are read in one pass, as nexmark.c reads them (the same
// algorithm, so that the Wasm cost is what the table shows): an event
// whose event_type is not the one wanted is dropped as soon as it is read;
// the wanted member is then taken, or iterated in place.
func eventTypeIs(it *jsonscan.Iter, typ byte) bool {
	v, st := it.Value()
	return st == jsonscan.Field && len(v) == 1 && v[0] == '0'+typ
}

// inner is the object under name in an event of type typ, or nil.
func inner(v []byte, typ byte, name string) []byte {
	it, ok := jsonscan.Objects(v)
	if !ok {
		return nil
	}
	for {
		k, st := it.NextKey()
		if st != jsonscan.Field {
			return nil
		}
		switch {
		case jsonscan.Equal(k, []byte("event_type")):
			if !eventTypeIs(&it, typ) {
				return nil
			}
		case jsonscan.Equal(k, []byte(name)):
			raw, st := it.Value()
			if st != jsonscan.Field || jsonscan.KindOf(raw) != jsonscan.Object {
				return nil
			}
			return raw
		}
	}
}

// objectField is the object under name in v, or nil.
func objectField(v []byte, name string) []byte {
	raw, st := jsonscan.Lookup(v, []byte(name))
	if st != jsonscan.Field || jsonscan.KindOf(raw) != jsonscan.Object {
		return nil
	}
	return raw
}

type bid struct{ auction, bidder, price, dateTime, extra []byte }

func (b *bid) member(k, v []byte) {
	switch {
	case jsonscan.Equal(k, []byte("auction")):
		b.auction = v
	case jsonscan.Equal(k, []byte("bidder")):
		b.bidder = v
	case jsonscan.Equal(k, []byte("price")):
		b.price = v
	case jsonscan.Equal(k, []byte("dateTime")):
		b.dateTime = v
	case jsonscan.Equal(k, []byte("extra")):
		b.extra = v
	}
}

func (b *bid) complete() bool {
	return b.auction != nil && b.bidder != nil && b.price != nil && b.dateTime != nil && b.extra != nil
}

// bidFields reads a bid object (one q7 kept).
func bidFields(obj []byte, b *bid) bool {
	*b = bid{}
	it, ok := jsonscan.Objects(obj)
	if !ok {
		return false
	}
	for {
		k, v, st := it.Next()
		if st == jsonscan.End {
			return b.complete()
		}
		if st == jsonscan.Malformed {
			return false
		}
		b.member(k, v)
	}
}

// readBid reads the bid of a bid event, its object iterated in place: 1
// with every field, or with auction and price only when !all; 0 when the
// record is not a bid event; -1 when the bid lacks a field.
func readBid(v []byte, b *bid, all bool) int {
	*b = bid{}
	top, ok := jsonscan.Objects(v)
	if !ok {
		return 0
	}
	for {
		k, st := top.NextKey()
		if st != jsonscan.Field {
			return 0
		}
		if jsonscan.Equal(k, []byte("event_type")) {
			if !eventTypeIs(&top, 2) {
				return 0
			}
			continue
		}
		if !jsonscan.Equal(k, []byte("bid")) {
			continue
		}
		in, ok := top.Enter()
		if !ok {
			return 0
		}
		for {
			k, v, st := in.Next()
			if st == jsonscan.Malformed {
				return 0
			}
			if st == jsonscan.End {
				break
			}
			b.member(k, v)
			if !all && b.auction != nil && b.price != nil {
				return 1
			}
		}
		if !b.complete() {
			return -1
		}
		return 1
	}
}

func appendBid(dst []byte, b *bid, priceMilli int64) []byte {
	dst = append(dst, `{"auction":`...)
	dst = append(dst, b.auction...)
	dst = append(dst, `,"bidder":`...)
	dst = append(dst, b.bidder...)
	dst = append(dst, `,"price":`...)
	if priceMilli < 0 {
		dst = append(dst, b.price...)
	} else {
		dst = strconv.AppendInt(dst, priceMilli/1000, 10)
		dst = append(dst, '.', byte('0'+priceMilli/100%10), byte('0'+priceMilli/10%10), byte('0'+priceMilli%10))
	}
	dst = append(dst, `,"dateTime":`...)
	dst = append(dst, b.dateTime...)
	dst = append(dst, `,"extra":`...)
	dst = append(dst, b.extra...)
	return append(dst, '}')
}

func asInt(raw []byte) (int64, bool) {
	if jsonscan.KindOf(raw) != jsonscan.Number {
		return 0, false
	}
	f, ok := jsonscan.ParseNumber(raw)
	if !ok || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

func (o *operator) stateless(r *stream.Record, out *stream.Batch) error {
	switch o.cfg.Query {
	case "persons", "auctions":
		name := "person"
		if o.cfg.Query == "auctions" {
			name = "auction"
		}
		typ := byte(0)
		if o.cfg.Query == "auctions" {
			typ = 1
		}
		if obj := inner(r.Value, typ, name); obj != nil {
			out.Add(r.Key, obj, r.Timestamp)
		}
		return nil
	case "bids":
		obj := inner(r.Value, 2, "bid")
		if obj == nil {
			return nil
		}
		if o.cfg.WindowMs > 0 {
			o.out = strconv.AppendInt(o.out[:0], floorTo(r.Timestamp, o.cfg.WindowMs), 10)
			out.Add(o.out, obj, r.Timestamp)
			return nil
		}
		out.Add(r.Key, obj, r.Timestamp)
		return nil
	}
	var b bid
	switch readBid(r.Value, &b, o.cfg.Query != "q2") {
	case 0:
		return nil
	case -1:
		return fmt.Errorf("nexmark: %s: a bid without auction, bidder, price, dateTime or extra", o.cfg.Query)
	}
	switch o.cfg.Query {
	case "q0":
		o.out = appendBid(o.out[:0], &b, -1)
	case "q1":
		p, ok := asInt(b.price)
		if !ok || p < 0 || p > math.MaxInt64/908 {
			return fmt.Errorf("nexmark: q1: price %s is not a whole number of cents", b.price)
		}
		o.out = appendBid(o.out[:0], &b, p*908)
	case "q2":
		a, ok := asInt(b.auction)
		if !ok || a%123 != 0 {
			return nil
		}
		o.out = append(append(append(append(append(o.out[:0], `{"auction":`...), b.auction...), `,"price":`...), b.price...), '}')
	}
	out.Add(r.Key, o.out, r.Timestamp)
	return nil
}

// The keyed queries' state: [int64 a][int64 b][entries: uint32 len, bytes],
// little-endian, as in nexmark.c.

func (o *operator) load(key []byte) ([]byte, error) {
	v, ok, err := o.store.ValueGet(o.cfg.Query, key, nil, o.st[:0])
	if err != nil {
		return nil, err
	}
	o.st = v
	if !ok || len(v) < 16 {
		return nil, nil
	}
	return v, nil
}

func (o *operator) keepMax(key []byte, x int64, e []byte, due int64) error {
	v, err := o.load(key)
	if err != nil {
		return err
	}
	if v != nil && x < int64(binary.LittleEndian.Uint64(v)) {
		return nil
	}
	var n []byte
	if v != nil && x == int64(binary.LittleEndian.Uint64(v)) {
		n = v
	} else {
		n = binary.LittleEndian.AppendUint64(v[:0], uint64(x))
		n = binary.LittleEndian.AppendUint64(n, uint64(due))
	}
	n = binary.LittleEndian.AppendUint32(n, uint32(len(e)))
	n = append(n, e...)
	o.st = n
	if v == nil {
		if err := o.store.TimerRegister(state.EventTime, key, nil, due); err != nil {
			return err
		}
	}
	return o.store.ValuePut(o.cfg.Query, key, nil, n, 0)
}

func (o *operator) q4avg(r *stream.Record, out *stream.Batch) error {
	f, st := jsonscan.Lookup(r.Value, []byte("final"))
	final, ok := asInt(f)
	if st != jsonscan.Field || !ok {
		return errors.New("nexmark: q4avg: input is not a closing price {id, category, final}")
	}
	v, err := o.load(r.Key)
	if err != nil {
		return err
	}
	var sum, count int64
	if v != nil {
		sum, count = int64(binary.LittleEndian.Uint64(v)), int64(binary.LittleEndian.Uint64(v[8:]))
	}
	sum, count = sum+final, count+1
	o.st = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(o.st[:0], uint64(sum)), uint64(count))
	if err := o.store.ValuePut("q4avg", r.Key, nil, o.st, 0); err != nil {
		return err
	}
	b := append(append(o.out[:0], `{"category":`...), r.Key...)
	b = strconv.AppendInt(append(b, `,"avg":`...), sum/count, 10)
	b = strconv.AppendInt(append(b, `,"auctions":`...), count, 10)
	o.out = append(b, '}')
	out.Add(r.Key, o.out, r.Timestamp)
	return nil
}

func (o *operator) q5(r *stream.Record) error {
	key, st1 := jsonscan.Lookup(r.Value, []byte("key"))
	cnt, st2 := jsonscan.Lookup(r.Value, []byte("count"))
	end, st3 := jsonscan.Lookup(r.Value, []byte("window_end"))
	c, ok1 := asInt(cnt)
	e, ok2 := asInt(end)
	if st1 != jsonscan.Field || st2 != jsonscan.Field || st3 != jsonscan.Field || jsonscan.KindOf(key) != jsonscan.String || !ok1 || !ok2 {
		return errors.New("nexmark: q5: input is not a window result with key, count and window_end")
	}
	return o.keepMax(r.Key, c, key[1:len(key)-1], e-1)
}

func (o *operator) q7(r *stream.Record) error {
	p, st := jsonscan.Lookup(r.Value, []byte("price"))
	price, ok := asInt(p)
	if st != jsonscan.Field || !ok {
		return errors.New("nexmark: q7: a bid without a price")
	}
	start := floorTo(r.Timestamp, o.cfg.WindowMs)
	return o.keepMax(r.Key, price, r.Value, start+o.cfg.WindowMs-1)
}

func (o *operator) q8(r *stream.Record, out *stream.Batch) error {
	left := objectField(r.Value, "left")
	if left == nil {
		return errors.New("nexmark: q8: input is not a join result {left, right}")
	}
	v, err := o.load(r.Key)
	if err != nil {
		return err
	}
	if v != nil && int64(binary.LittleEndian.Uint64(v)) >= r.Timestamp {
		return nil
	}
	id, st1 := jsonscan.Lookup(left, []byte("id"))
	name, st2 := jsonscan.Lookup(left, []byte("name"))
	if st1 != jsonscan.Field || st2 != jsonscan.Field {
		return errors.New("nexmark: q8: a person without id or name")
	}
	b := append(append(o.out[:0], `{"id":`...), id...)
	b = append(append(b, `,"name":`...), name...)
	b = strconv.AppendInt(append(b, `,"starttime":`...), r.Timestamp+1-o.cfg.WindowMs, 10)
	o.out = append(b, '}')
	o.st = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(o.st[:0], uint64(r.Timestamp)), 0)
	if err := o.store.ValuePut("q8", r.Key, nil, o.st, 0); err != nil {
		return err
	}
	out.Add(r.Key, o.out, r.Timestamp)
	return nil
}

func (o *operator) now() int64 {
	if o.nowFn != nil {
		return o.nowFn()
	}
	return time.Now().UnixMilli()
}

func (o *operator) q12Emit(out *stream.Batch, key []byte, count, end, ts int64) {
	b := append(append(o.out[:0], `{"bidder":`...), key...)
	b = strconv.AppendInt(append(b, `,"bid_count":`...), count, 10)
	b = strconv.AppendInt(append(b, `,"starttime":`...), end-o.cfg.WindowMs, 10)
	b = strconv.AppendInt(append(b, `,"endtime":`...), end, 10)
	o.out = append(b, '}')
	out.Add(key, o.out, ts)
}

func (o *operator) q12(r *stream.Record, out *stream.Batch) error {
	v, err := o.load(r.Key)
	if err != nil {
		return err
	}
	now := o.now()
	var count, end int64
	if v != nil {
		count, end = int64(binary.LittleEndian.Uint64(v)), int64(binary.LittleEndian.Uint64(v[8:]))
		if now >= end {
			o.q12Emit(out, r.Key, count, end, r.Timestamp)
			count = 0
		}
	}
	if count == 0 {
		end = floorTo(now, o.cfg.WindowMs) + o.cfg.WindowMs
		if err := o.store.TimerRegister(state.ProcessingTime, r.Key, nil, end); err != nil {
			return err
		}
		if err := o.store.TimerRegister(state.EventTime, r.Key, nil, math.MaxInt64); err != nil {
			return err
		}
	}
	o.st = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(o.st[:0], uint64(count+1)), uint64(end))
	return o.store.ValuePut("q12", r.Key, nil, o.st, 0)
}

func (o *operator) ProcessWatermark(_ context.Context, wm int64, out *stream.Batch) error {
	return o.fire(state.EventTime, wm, out)
}

func (o *operator) OnProcessingTime(_ context.Context, now int64, out *stream.Batch) error {
	return o.fire(state.ProcessingTime, now, out)
}

func (o *operator) fire(kind state.TimerKind, upTo int64, out *stream.Batch) error {
	if o.store == nil || o.cfg.Query == "q8" || o.cfg.Query == "q4avg" {
		return nil
	}
	return o.store.PopTimers(kind, upTo, func(t state.Timer) error { return o.onTimer(kind, t, out) })
}

func (o *operator) onTimer(kind state.TimerKind, t state.Timer, out *stream.Batch) error {
	v, err := o.load(t.Key)
	if err != nil || v == nil {
		return err
	}
	if o.cfg.Query == "q12" {
		end := int64(binary.LittleEndian.Uint64(v[8:]))
		if kind == state.ProcessingTime && t.Timestamp != end {
			return nil
		}
		ts := t.Timestamp
		if kind == state.EventTime {
			ts = end - 1
		}
		o.q12Emit(out, t.Key, int64(binary.LittleEndian.Uint64(v)), end, ts)
		return o.store.ValueDelete("q12", t.Key, nil)
	}
	best := int64(binary.LittleEndian.Uint64(v))
	for i := 16; i+4 <= len(v); {
		n := int(binary.LittleEndian.Uint32(v[i:]))
		e := v[i+4 : i+4+n]
		i += 4 + n
		if o.cfg.Query == "q5" {
			b := append(append(o.out[:0], `{"auction":`...), e...)
			b = strconv.AppendInt(append(b, `,"num":`...), best, 10)
			b = strconv.AppendInt(append(b, `,"window_end":`...), t.Timestamp+1, 10)
			o.out = append(b, '}')
		} else {
			var b bid
			if !bidFields(e, &b) {
				return errors.New("nexmark: q7: a kept bid lost a field")
			}
			o.out = appendBid(o.out[:0], &b, -1)
		}
		out.Add(t.Key, o.out, t.Timestamp)
	}
	return o.store.ValueDelete(o.cfg.Query, t.Key, nil)
}
