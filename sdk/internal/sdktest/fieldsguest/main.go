// Command fieldsguest is a test operator for package sdktest: it declares
// fields (package fields, ABI version 6) and echoes, for each record, what
// the SDK gives for it, as host/testdata/fields.c does for the host's
// tests. Its configuration is a mode byte and a field list:
//
//	'F' list   declare list in Open
//	'2' list   declare it twice in Open (the second Declare fails Open)
//	'P' list   declare it during the first Process (fails it)
//	'N'        declare nothing
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

	"github.com/eddy-stream/eddy/abi"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/fields"
)

type guest struct {
	mode  byte
	paths [][]string
	out   []byte
	spans [][]byte
}

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
	case 'F':
		return fields.Declare(g.paths...)
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
	g.out = append(g.out[:0], '0')
	if fields.Valid() {
		g.out[0] = '1'
	}
	for j := range g.paths {
		g.out = append(g.out, '|')
		if v, ok := fields.Get(j); ok {
			g.out = append(g.out, v...)
		} else {
			g.out = append(g.out, '-')
		}
	}
	// Spans must give what Valid and Get gave.
	if len(g.spans) != len(g.paths) {
		g.spans = make([][]byte, len(g.paths))
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

func (g *guest) Close() error { return nil }

func main() {}
