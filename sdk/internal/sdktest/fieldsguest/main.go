// Command fieldsguest is a test operator for package sdktest: it declares
// fields (package fields, ABI versions 6 and 7) and echoes, for each record, what
// the SDK gives for it, as host/testdata/fields.c does for the host's
// tests. Its configuration is a mode byte and a field list:
//
//	'F' list   declare list in Open
//	'2' list   declare it twice in Open (the second Declare fails Open)
//	'P' list   declare it during the first Process (fails it)
//	'N'        declare nothing
//	'M' list   declare list in Open with DeclareWithNumbers (its number
//	           paths after its span paths); each number path echoes as "|"
//	           and the number in Go's shortest form, or "|-" when absent
//	'E' list   as 'F', but emit the echo with EmitParts: parts of the
//	           record's value and constants, which the host gathers
//	'L' list   as 'E', with Parts: SpanParts, constants made Parts once
//	           in Open, and EmitPartList
//
// Each output value is the status digit, then for each path "|" and the
// span's bytes, or "|-" when absent; with 'N', the value unchanged. It
// fails the call when fields.Spans disagrees with Valid and Get.
// Built with -tags two it is a two-input operator (package co) whose
// inputs both echo, the right one with its output key prefixed by "r:".
package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/fields"
)

type guest struct {
	mode    byte
	paths   [][]string
	numbers int // of the paths, the last numbers are number paths ('M')
	out     []byte
	spans   [][]byte
	parts   [][]byte

	// Mode 'L': the spans and the list as Parts, and the constants.
	spanParts            []fields.Part
	list                 []fields.Part
	zero, one, bar, dash fields.Part
}

// The constant parts of mode 'E'.
var (
	digits = []byte("01")
	bar    = []byte("|")
	dash   = []byte("-")
)

func (g *guest) Open(config []byte) error {
	if len(config) == 0 {
		return errors.New("fieldsguest: empty config")
	}
	g.mode = config[0]
	if g.mode == 'N' {
		return nil
	}
	f, err := abi.ParseFieldList(config[1:])
	if err != nil {
		return err
	}
	g.paths = f.Paths()
	switch g.mode {
	case 'F', 'E':
		return fields.Declare(g.paths...)
	case 'L':
		g.spanParts = make([]fields.Part, len(g.paths))
		g.zero, g.one = fields.PartOf(digits[0:1]), fields.PartOf(digits[1:2])
		g.bar, g.dash = fields.PartOf(bar), fields.PartOf(dash)
		return fields.Declare(g.paths...)
	case 'M':
		var spans, numbers [][]string
		for j, p := range g.paths {
			if f.Number(j) {
				numbers = append(numbers, p)
			} else if len(numbers) > 0 {
				return errors.New("fieldsguest: a span path after a number path")
			} else {
				spans = append(spans, p)
			}
		}
		g.numbers = len(numbers)
		return fields.DeclareWithNumbers(spans, numbers)
	case '2':
		if err := fields.Declare(g.paths...); err != nil {
			return err
		}
		return fields.Declare(g.paths...)
	}
	return nil
}

func (g *guest) echo(r *eddy.Record, key []byte) error {
	if g.mode == 'P' {
		return fields.Declare(g.paths...)
	}
	if g.mode == 'N' {
		eddy.Emit(eddy.Record{Key: key, Value: r.Value, Timestamp: r.Timestamp})
		return nil
	}
	if g.mode == 'E' {
		return g.echoParts(r, key)
	}
	if g.mode == 'L' {
		return g.echoPartList(r, key)
	}
	g.out = append(g.out[:0], '0')
	if fields.Valid() {
		g.out[0] = '1'
	}
	spanPaths := len(g.paths) - g.numbers
	for j := range g.paths[:spanPaths] {
		g.out = append(g.out, '|')
		if v, ok := fields.Get(j); ok {
			g.out = append(g.out, v...)
		} else {
			g.out = append(g.out, '-')
		}
	}
	for j := spanPaths; j < len(g.paths); j++ {
		g.out = append(g.out, '|')
		if x, ok := fields.Number(j); ok {
			g.out = strconv.AppendFloat(g.out, x, 'g', -1, 64)
		} else {
			g.out = append(g.out, '-')
		}
	}
	// Spans must give what Valid and Get gave.
	if len(g.spans) != spanPaths {
		g.spans = make([][]byte, spanPaths)
	}
	valid := fields.Spans(g.spans)
	if valid != (g.out[0] == '1') {
		return fmt.Errorf("fieldsguest: Spans says valid %v, Valid %c", valid, g.out[0])
	}
	for j, v := range g.spans {
		if w, ok := fields.Get(j); ok != (v != nil) || !bytes.Equal(v, w) {
			return fmt.Errorf("fieldsguest: Spans gives path %d as %q, Get as %q (%v)", j, v, w, ok)
		}
	}
	eddy.Emit(eddy.Record{Key: key, Value: g.out, Timestamp: r.Timestamp})
	return nil
}

// echoParts emits what echo does, as parts: the record's spans and
// package-level constants, both valid until Process returns.
func (g *guest) echoParts(r *eddy.Record, key []byte) error {
	if len(g.spans) != len(g.paths) {
		g.spans = make([][]byte, len(g.paths))
	}
	parts := g.parts[:0]
	if fields.Spans(g.spans) {
		parts = append(parts, digits[1:2])
	} else {
		parts = append(parts, digits[0:1])
	}
	for _, v := range g.spans {
		if v == nil {
			v = dash
		}
		parts = append(parts, bar, v)
	}
	g.parts = parts
	fields.EmitParts(&eddy.Record{Key: key, Timestamp: r.Timestamp}, parts...)
	return nil
}

// echoPartList is echoParts with Parts: the record's spans by SpanParts
// and the constants made Parts in Open.
func (g *guest) echoPartList(r *eddy.Record, key []byte) error {
	list := append(g.list[:0], g.zero)
	if fields.SpanParts(g.spanParts) {
		list[0] = g.one
	}
	for _, p := range g.spanParts {
		if p == fields.NoPart {
			p = g.dash
		}
		list = append(list, g.bar, p)
	}
	g.list = list
	fields.EmitPartList(&eddy.Record{Key: key, Timestamp: r.Timestamp}, list)
	return nil
}

func (g *guest) Close() error { return nil }

func main() {}
