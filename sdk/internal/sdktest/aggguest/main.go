// Command aggguest is a test aggregate for package sdktest (ABI version
// 3). Its accumulator spells out how it was made, so that the same script
// run against it and testdata/cagg.c must give the same output: "" is
// empty, Add appends "+" and the record's value, Merge makes "(a|b)", and
// the result is the accumulator as a JSON string. A record "error" fails
// Add, "panic" panics; an accumulator "error" fails Merge and Result.
package main

import (
	"errors"

	"github.com/eddy-stream/eddy/abi/jsonscan"
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/aggregate"
)

type trail struct{}

var errBad = errors.New("bad accumulator")

func (trail) Open(config []byte) error {
	if string(config) == `"error"` {
		return errors.New("open refused")
	}
	return nil
}

func (trail) Create(dst []byte) []byte { return dst }

func (trail) Add(dst, acc []byte, r *eddy.Record) ([]byte, error) {
	switch string(r.Value) {
	case "error":
		return dst, errors.New("bad record")
	case "panic":
		panic("boom")
	}
	dst = append(dst, acc...)
	dst = append(dst, '+')
	return append(dst, r.Value...), nil
}

func (trail) Merge(dst, a, b []byte) ([]byte, error) {
	if string(a) == "error" || string(b) == "error" {
		return dst, errBad
	}
	dst = append(dst, '(')
	dst = append(dst, a...)
	dst = append(dst, '|')
	dst = append(dst, b...)
	return append(dst, ')'), nil
}

func (trail) Result(dst, acc []byte) ([]byte, error) {
	if string(acc) == "error" {
		return dst, errBad
	}
	return jsonscan.AppendQuote(dst, acc), nil
}

func init() { aggregate.Register(trail{}) }

func main() {}
