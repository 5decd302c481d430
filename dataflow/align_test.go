package dataflow

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// Script messages for the aligner: "2:a" is record batch "a" on channel 2
// (its label travels in wm), "2:b7" barrier 7 on channel 2, "2:eos" the
// end of channel 2.
func scriptMessage(t *testing.T, s string) message {
	t.Helper()
	var ch int
	var what string
	if _, err := fmt.Sscanf(strings.Replace(s, ":", " ", 1), "%d %s", &ch, &what); err != nil {
		t.Fatalf("bad script message %q", s)
	}
	if what == "eos" {
		return message{kind: msgEOS, channel: ch}
	}
	if id, err := strconv.ParseInt(strings.TrimPrefix(what, "b"), 10, 64); strings.HasPrefix(what, "b") && err == nil {
		return message{kind: msgBarrier, channel: ch, barrier: &barrier{id: id}}
	}
	return message{kind: msgBatch, channel: ch, batch: &stream.Batch{}, wm: int64(what[0])}
}

func describe(m message) string {
	switch m.kind {
	case msgEOS:
		return fmt.Sprintf("%d:eos", m.channel)
	case msgBarrier:
		return fmt.Sprintf("%d:b%d", m.channel, m.barrier.id)
	default:
		return fmt.Sprintf("%d:%c", m.channel, rune(m.wm))
	}
}

// driveAligner runs the aligner as the task's loop does and returns what
// the task does, in order: "0:a" processed, "checkpoint 3" snapshot and
// forward, "abort 3" alignment abandoned.
func driveAligner(t *testing.T, channels int, script string) []string {
	t.Helper()
	a := newAligner(channels)
	in := strings.Fields(script)
	var out []string
	for {
		m, ok := a.next()
		if !ok {
			if len(in) == 0 {
				break
			}
			m, in = scriptMessage(t, in[0]), in[1:]
		}
		switch a.admit(m) {
		case alignProcess:
			out = append(out, describe(m))
			if m.kind == msgEOS && a.end(m.channel) {
				out = append(out, fmt.Sprintf("checkpoint %d", a.cur.id))
				a.release()
			}
		case alignComplete:
			out = append(out, fmt.Sprintf("checkpoint %d", a.cur.id))
			a.release()
		case alignAborted:
			out = append(out, fmt.Sprintf("abort %d", a.aborted))
		}
	}
	if len(a.held) > 0 || len(a.replay) > 0 {
		t.Fatalf("left with %d held and %d to replay", len(a.held), len(a.replay))
	}
	return out
}

func TestAligner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		channels int
		script   string
		want     string
	}{
		{"one channel needs no alignment", 1,
			"0:a 0:b1 0:b 0:b2 0:c",
			"0:a checkpoint 1 0:b checkpoint 2 0:c"},
		{"aligned channels are held back and replayed in order", 2,
			"0:a 0:b1 0:b 0:c 1:d 1:e 1:b1 1:f 0:g",
			"0:a 1:d 1:e checkpoint 1 0:b 0:c 1:f 0:g"},
		{"three channels", 3,
			"1:b1 1:a 0:x 2:b1 2:c 0:b1 0:y",
			"0:x checkpoint 1 1:a 2:c 0:y"},
		{"end of input of a held channel is replayed", 2,
			"0:b1 0:a 0:eos 1:b 1:b1 1:eos",
			"1:b checkpoint 1 0:a 0:eos 1:eos"},
		{"an ended channel counts as aligned", 2,
			"1:eos 0:a 0:b1 0:b",
			"1:eos 0:a checkpoint 1 0:b"},
		{"a channel ending completes the alignment", 2,
			"0:b1 0:a 1:x 1:eos",
			"1:x 1:eos checkpoint 1 0:a"},
		{"the next barrier held in an aligned channel waits its turn", 2,
			"0:b1 0:a 0:b2 0:c 1:b1 1:d 1:b2 1:e",
			"checkpoint 1 0:a 1:d checkpoint 2 0:c 1:e"},
		{"a barrier of a done checkpoint is dropped", 2,
			"0:b1 1:b1 0:b1 1:a 0:b0",
			"checkpoint 1 1:a"},
		{"an older barrier is dropped while aligning", 2,
			"0:b2 1:b1 1:a 1:b2 0:c",
			"1:a checkpoint 2 0:c"},
		{"a newer barrier on an unaligned channel aborts", 2,
			"0:b1 0:a 1:x 1:b2 0:b 0:b2 1:y",
			"1:x abort 1 0:a 0:b checkpoint 2 1:y"},
		{"the aborted checkpoint's late barrier is dropped", 2,
			"0:b1 0:a 1:b2 0:b1 0:b 0:b2",
			"abort 1 0:a 0:b checkpoint 2"},
		{"the next barrier held on two channels", 3,
			"0:b1 0:a 1:b1 1:b 0:b2 0:c 2:b1 1:b2 2:b2",
			"checkpoint 1 0:a 1:b checkpoint 2 0:c"},
		{"held messages go before messages still to replay", 3,
			"0:b1 0:b2 0:x 1:b1 1:b2 1:y 2:z 2:eos",
			"2:z 2:eos checkpoint 1 checkpoint 2 0:x 1:y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(driveAligner(t, tc.channels, tc.script), " "); got != tc.want {
				t.Fatalf("script %s\n got %s\nwant %s", tc.script, got, tc.want)
			}
		})
	}
}
