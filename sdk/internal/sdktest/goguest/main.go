// Command goguest is a test operator for package sdktest: what it does with
// a record depends on the record's value, so that one module can exercise
// every path of the Go SDK.
package main

import (
	"errors"
	"strconv"
	"strings"

	eddy "github.com/eddy-stream/eddy/sdk/go"
)

type guest struct{}

func (guest) Open(config []byte) error {
	if string(config) == `"emit"` {
		eddy.EmitKV(nil, []byte("from open"), 0)
	}
	if string(config) == `"error"` {
		return errors.New("open refused")
	}
	eddy.Logf(eddy.LevelInfo, "opened with %s", config)
	return nil
}

func (guest) Process(r *eddy.Record) error {
	v := string(r.Value)
	switch {
	case v == "panic":
		panic("boom")
	case v == "error":
		return errors.New("bad record")
	case strings.HasPrefix(v, "emit "):
		n, _ := strconv.Atoi(v[len("emit "):])
		for i := range n {
			eddy.EmitKV(r.Key, []byte(strconv.Itoa(i)), r.Timestamp)
		}
		return nil
	}
	eddy.Emit(*r)
	return nil
}

func (guest) Close() error {
	eddy.EmitKV([]byte("close"), []byte("closed"), eddy.NoTimestamp)
	return nil
}

func init() { eddy.Register(guest{}) }

func main() {}
