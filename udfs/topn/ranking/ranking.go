// Package ranking is the algorithm of the "top-n" example window function
// (the apply of a window node): when a window fires, emit its n elements
// with the largest value of a numeric field, best first.
//
// It is pure Go with no SDK import, so the same code runs inside the Wasm
// guest (udfs/topn/go) and natively (tests, against the guests).
// udfs/topn/c/topn.c is the same algorithm in C, written to mirror this
// file; change both together.
//
// Configuration (JSON; every key optional):
//
//	{"n": 3, "field": "amount"}
//
// n, from 1 to MaxN, is how many elements to emit (default 3); field is
// the top-level member to rank by (default "amount"). An element counts
// when its value is a JSON object whose field is a number; others are
// never emitted. Elements are ranked by the number, largest first, and
// equal numbers by their order in the window (earlier first), which is a
// total order: Go and C select and sort the same elements whatever their
// algorithms. Each selected element becomes one record:
//
//	{"key":"card-0042","window_start":0,"window_end":60000,"rank":1,"value":{…the element…}}
//
// where rank counts from 1 and value is the element's value as it came,
// without surrounding whitespace.
package ranking

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// Defaults and bounds of the configuration.
const (
	DefaultN     = 3
	MaxN         = 10_000
	DefaultField = "amount"
)

// Config is a parsed configuration.
type Config struct {
	N     int
	Field []byte // unescaped
}

// Parse reads a configuration. Its error messages are the ones the C
// version reports too.
func Parse(config []byte) (Config, error) {
	c := Config{N: DefaultN, Field: []byte(DefaultField)}
	it, ok := jsonscan.Objects(config)
	if !ok {
		return c, errors.New("top-n: config is not a JSON object")
	}
	seenN, seenField := false, false
	for {
		key, value, st := it.Next()
		switch st {
		case jsonscan.Malformed:
			return c, errors.New("top-n: config is not valid JSON")
		case jsonscan.End:
			return c, nil
		}
		switch {
		case jsonscan.Equal(key, []byte("n")) && !seenN:
			seenN = true
			d, ok := jsonscan.ParseNumber(value)
			if !ok || d != math.Trunc(d) || d < 1 || d > MaxN {
				return c, fmt.Errorf("top-n: config: n must be a whole number from 1 to %d", MaxN)
			}
			c.N = int(d)
		case jsonscan.Equal(key, []byte("field")) && !seenField:
			seenField = true
			if jsonscan.KindOf(value) != jsonscan.String {
				return c, errors.New("top-n: config: field must be a string")
			}
			c.Field = jsonscan.AppendUnquote(nil, value)
		default:
			return c, fmt.Errorf("top-n: config: unknown or repeated key %s", key)
		}
	}
}

// candidate is an element that counts: its number and its index in the
// window.
type candidate struct {
	v float64
	i int
}

// worse is the ranking's order, reversed: a ranks below b.
func worse(a, b candidate) bool { return a.v < b.v || a.v == b.v && a.i > b.i }

// Ranker selects the top elements of windows. It keeps its buffers from
// one window to the next, so ranking allocates nothing once they have
// grown. It is not safe for concurrent use.
type Ranker struct {
	cfg  Config
	heap []candidate // a min-heap by the ranking: the worst kept on top
	top  []int
}

// New returns a Ranker for the configuration.
func New(c Config) *Ranker { return &Ranker{cfg: c} }

// Top returns the indices in elems of the elements to emit, best first.
// The slice is the Ranker's: valid until the next call.
func (r *Ranker) Top(elems []abi.Record) []int {
	h := r.heap[:0]
	for i := range elems {
		f, st := jsonscan.Lookup(elems[i].Value, r.cfg.Field)
		if st != jsonscan.Field || jsonscan.KindOf(f) != jsonscan.Number {
			continue
		}
		v, ok := jsonscan.ParseNumber(f)
		if !ok {
			continue
		}
		c := candidate{v, i}
		switch {
		case len(h) < r.cfg.N:
			h = append(h, c)
			up(h, len(h)-1)
		case worse(h[0], c):
			h[0] = c
			down(h, 0)
		}
	}
	slices.SortFunc(h, func(a, b candidate) int {
		if worse(b, a) {
			return -1
		}
		return 1 // never equal: indices differ
	})
	r.heap = h
	r.top = r.top[:0]
	for _, c := range h {
		r.top = append(r.top, c.i)
	}
	return r.top
}

func up(h []candidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !worse(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func down(h []candidate, i int) {
	for {
		m, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && worse(h[l], h[m]) {
			m = l
		}
		if r < len(h) && worse(h[r], h[m]) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// AppendOutput appends the output value for the element value at rank
// (from 1) of the window [start, end) of key.
func AppendOutput(dst, key []byte, start, end int64, rank int, value []byte) []byte {
	dst = append(dst, `{"key":`...)
	dst = jsonscan.AppendQuote(dst, key)
	dst = append(dst, `,"window_start":`...)
	dst = strconv.AppendInt(dst, start, 10)
	dst = append(dst, `,"window_end":`...)
	dst = strconv.AppendInt(dst, end, 10)
	dst = append(dst, `,"rank":`...)
	dst = strconv.AppendInt(dst, int64(rank), 10)
	dst = append(dst, `,"value":`...)
	dst = append(dst, trimSpace(value)...)
	return append(dst, '}')
}

// trimSpace drops JSON whitespace around a value.
func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
