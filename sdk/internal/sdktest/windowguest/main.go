// Command windowguest is a test window function for package sdktest: per
// window it emits one record, key = the window's key, value = its bounds,
// its size and its elements' values and timestamps, so that the same
// script run against it and testdata/cwindow.c must give the same output.
// An element "error" fails the window.
package main

import (
	"errors"
	"strconv"

	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/window"
)

type summary struct{ out []byte }

func (s *summary) Open([]byte) error { return nil }

func (s *summary) Apply(w window.Window, elems []eddy.Record) error {
	out := append(s.out[:0], '[')
	out = strconv.AppendInt(out, w.Start, 10)
	out = append(out, ',')
	out = strconv.AppendInt(out, w.End, 10)
	out = append(out, ") "...)
	out = strconv.AppendInt(out, int64(len(elems)), 10)
	out = append(out, ':')
	for _, e := range elems {
		if string(e.Value) == "error" {
			return errors.New("bad element")
		}
		out = append(out, ' ')
		out = append(out, e.Value...)
		out = append(out, '@')
		out = strconv.AppendInt(out, e.Timestamp, 10)
	}
	s.out = out
	eddy.EmitKV(w.Key, out, w.MaxTimestamp())
	return nil
}

func init() { window.Register(&summary{}) }

func main() {}
