// Command keyedguest is a test operator for package sdktest that uses
// keyed state and timers (ABI version 2): each record's value is a command
// on the record key's state, and the results are emitted as text, so that
// the same script run against it and testdata/ckeyed.c must give the same
// output. Commands:
//
//	vput X | vget | vclear                  value state "v"
//	ladd X | lget | lclear                  list state "l"
//	mput K=V | mget K | mdel K | mentries   map state "m"
//	timer e|p TS | untimer e|p TS           timers
//	time | key                              watermark and clock; current key
//	declare                                 declare a state outside Open (fails)
package main

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed"
)

type guest struct {
	v *keyed.Value
	l *keyed.List
	m *keyed.Map
}

// early is declared from an init function: the SDK declares it to the
// host in eddy_open.
var early = keyed.ValueState("early")

func (g *guest) Open([]byte) error {
	g.v = keyed.ValueState("v")
	g.l = keyed.ListState("l", keyed.TTL(0))
	g.m = keyed.MapState("m")
	return nil
}

func emit(key []byte, s string) { eddy.EmitKV(key, []byte(s), 0) }

func show(b []byte, ok bool) string {
	if !ok {
		return "-"
	}
	return string(b)
}

func kind(s string) (keyed.TimerKind, error) {
	switch s {
	case "e":
		return keyed.EventTimeTimer, nil
	case "p":
		return keyed.ProcessingTimeTimer, nil
	}
	return 0, errors.New("bad timer kind " + s)
}

func (g *guest) Process(r *eddy.Record) error {
	cmd, arg, _ := strings.Cut(string(r.Value), " ")
	switch cmd {
	case "vput":
		g.v.Put([]byte(arg))
	case "vget":
		emit(r.Key, show(g.v.Get()))
	case "vclear":
		g.v.Clear()
	case "ladd":
		g.l.Add([]byte(arg))
	case "lget":
		emit(r.Key, "["+string(bytes.Join(g.l.Get(), []byte(",")))+"]")
	case "lclear":
		g.l.Clear()
	case "mput":
		k, v, _ := strings.Cut(arg, "=")
		g.m.Put([]byte(k), []byte(v))
	case "mget":
		emit(r.Key, show(g.m.Get([]byte(arg))))
	case "mdel":
		g.m.Delete([]byte(arg))
	case "mentries":
		var parts []string
		g.m.Entries(func(uk, v []byte) bool {
			parts = append(parts, string(uk)+"="+string(v))
			return true
		})
		emit(r.Key, "{"+strings.Join(parts, ",")+"}")
	case "timer", "untimer":
		k, ts, _ := strings.Cut(arg, " ")
		kd, err := kind(k)
		if err != nil {
			return err
		}
		n, _ := strconv.ParseInt(ts, 10, 64)
		switch {
		case cmd == "timer" && kd == keyed.EventTimeTimer:
			keyed.RegisterEventTimeTimer(n)
		case cmd == "timer":
			keyed.RegisterProcessingTimeTimer(n)
		case kd == keyed.EventTimeTimer:
			keyed.DeleteEventTimeTimer(n)
		default:
			keyed.DeleteProcessingTimeTimer(n)
		}
	case "time":
		emit(r.Key, strconv.FormatInt(keyed.CurrentWatermark(), 10)+" "+strconv.FormatInt(keyed.ProcessingTime(), 10))
	case "key":
		early.Put(r.Key)
		emit(r.Key, "key "+string(keyed.CurrentKey())+" early "+show(early.Get()))
	case "declare":
		keyed.ValueState("late")
	default:
		return errors.New("unknown command " + cmd)
	}
	return nil
}

// OnTimer emits what fired, with the timer key's value state.
func (g *guest) OnTimer(t keyed.Timer) error {
	k := "e"
	if t.Kind == keyed.ProcessingTimeTimer {
		k = "p"
	}
	emit(t.Key, "fired "+k+" "+string(t.Key)+" "+strconv.FormatInt(t.Timestamp, 10)+" "+show(g.v.Get()))
	return nil
}

func (g *guest) Close() error { return nil }

func init() { eddy.Register(&guest{}) }

func main() {}
