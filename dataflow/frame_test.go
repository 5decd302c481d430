package dataflow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/stream"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

func batchFrame(b []byte) *eddyv1.Frame {
	return &eddyv1.Frame{Kind: &eddyv1.Frame_Batch{Batch: b}}
}

func barrierFrame(id uint64, triggered int64, kind eddyv1.CheckpointKind) *eddyv1.Frame {
	return &eddyv1.Frame{Kind: &eddyv1.Frame_Barrier{Barrier: &eddyv1.Barrier{CheckpointId: id, TriggeredUnixMs: triggered, Kind: kind}}}
}

func swapFrame(id uint64, triggered int64, swapID uint64, node string) *eddyv1.Frame {
	return &eddyv1.Frame{Kind: &eddyv1.Frame_Barrier{Barrier: &eddyv1.Barrier{CheckpointId: id, TriggeredUnixMs: triggered,
		Kind: eddyv1.CheckpointKind_CHECKPOINT_KIND_SWAP, SwapId: swapID, SwapNode: node}}}
}

// TestFrameMessage maps every kind of frame, well-formed or not, to what
// the consumer's gate reads, or to a clear error wrapping ErrBadFrame.
func TestFrameMessage(t *testing.T) {
	recs := []stream.Record{
		{Key: []byte("k1"), Value: []byte(`{"n":1}`), Timestamp: 7},
		{Value: []byte("v"), Timestamp: stream.NoTimestamp, Headers: []stream.Header{{Key: "h", Value: []byte("x")}}},
	}
	good := abi.AppendBatch(nil, recs)
	le := binary.LittleEndian
	withU32 := func(at int, v uint32) []byte {
		b := bytes.Clone(good)
		le.PutUint32(b[at:], v)
		return b
	}
	for _, tc := range []struct {
		name    string
		frame   *eddyv1.Frame
		want    message // batch compared by records
		wantRec []stream.Record
		err     string // when the frame is refused
		abiErr  bool   // the error also wraps abi.ErrMalformedBatch
	}{
		{name: "batch", frame: batchFrame(good), want: message{kind: msgBatch, channel: 3}, wantRec: recs},
		{name: "watermark", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: 1234}}, want: message{kind: msgWatermark, channel: 3, wm: 1234}},
		{name: "final watermark", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: math.MaxInt64}}, want: message{kind: msgWatermark, channel: 3, wm: math.MaxInt64}},
		{name: "negative watermark", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: math.MinInt64}}, want: message{kind: msgWatermark, channel: 3, wm: math.MinInt64}},
		{name: "idle", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Idle{Idle: &eddyv1.Idle{}}}, want: message{kind: msgIdle, channel: 3}},
		{name: "idle without message", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Idle{}}, want: message{kind: msgIdle, channel: 3}},
		{name: "end of input", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_EndOfInput{EndOfInput: &eddyv1.EndOfInput{}}}, want: message{kind: msgEOS, channel: 3}},
		{name: "nil frame", frame: nil, err: "frame without content"},
		{name: "no kind", frame: &eddyv1.Frame{}, err: "frame without content"},
		{name: "barrier", frame: barrierFrame(9, 1700, eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT),
			want: message{kind: msgBarrier, channel: 3, barrier: &barrier{id: 9, triggered: 1700}}},
		{name: "savepoint barrier", frame: barrierFrame(10, 0, eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT),
			want: message{kind: msgBarrier, channel: 3, barrier: &barrier{id: 10, savepoint: true}}},
		{name: "swap barrier", frame: swapFrame(11, 5, 3, "count"),
			want: message{kind: msgBarrier, channel: 3, barrier: &barrier{id: 11, savepoint: true, triggered: 5, swapID: 3, swapNode: "count"}}},
		{name: "swap barrier without node", frame: swapFrame(11, 0, 3, ""), err: `swap barrier 11 with swap id 3 and node ""`},
		{name: "swap barrier without swap id", frame: swapFrame(11, 0, 0, "count"), err: `swap barrier 11 with swap id 0 and node "count"`},
		{name: "swap id too large", frame: swapFrame(11, 0, math.MaxInt64+1, "count"), err: "swap barrier 11 with swap id 9223372036854775808"},
		{name: "savepoint barrier naming a swap", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Barrier{Barrier: &eddyv1.Barrier{CheckpointId: 12,
			Kind: eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT, SwapId: 1, SwapNode: "count"}}},
			err: `checkpoint barrier 12 of kind CHECKPOINT_KIND_SAVEPOINT names swap 1 of node "count"`},
		{name: "barrier without kind", frame: barrierFrame(9, 0, eddyv1.CheckpointKind_CHECKPOINT_KIND_UNSPECIFIED), err: "checkpoint barrier 9 of kind CHECKPOINT_KIND_UNSPECIFIED"},
		{name: "barrier of unknown kind", frame: barrierFrame(9, 0, 7), err: "checkpoint barrier 9 of kind 7"},
		{name: "barrier without id", frame: barrierFrame(0, 0, eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT), err: "checkpoint barrier with id 0"},
		{name: "barrier id too large", frame: barrierFrame(math.MaxInt64+1, 0, eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT), err: "checkpoint barrier with id 9223372036854775808"},
		{name: "nil barrier", frame: &eddyv1.Frame{Kind: &eddyv1.Frame_Barrier{}}, err: "checkpoint barrier with id 0"},
		{name: "nil batch", frame: batchFrame(nil), err: "shorter than the 8-byte header", abiErr: true},
		{name: "empty batch", frame: batchFrame(abi.AppendBatch(nil, nil)), err: "empty batch frame"},
		{name: "short header", frame: batchFrame(good[:5]), err: "shorter than the 8-byte header", abiErr: true},
		{name: "bad magic", frame: batchFrame(withU32(0, 0xdeadbeef)), err: "bad magic", abiErr: true},
		{name: "count too large", frame: batchFrame(withU32(4, 1000)), err: "1000 records do not fit", abiErr: true},
		{name: "count huge", frame: batchFrame(withU32(4, math.MaxUint32)), err: "do not fit", abiErr: true},
		{name: "key outside", frame: batchFrame(withU32(abi.HeaderSize+8, math.MaxUint32)), err: "key", abiErr: true},
		{name: "value length outside", frame: batchFrame(withU32(abi.HeaderSize+20, 1<<20)), err: "value", abiErr: true},
		{name: "headers outside", frame: batchFrame(withU32(abi.HeaderSize+abi.EntrySize+28, 1<<30)), err: "headers", abiErr: true},
		{name: "truncated data", frame: batchFrame(good[:len(good)-1]), err: "outside the", abiErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := frameMessage(tc.frame, 3)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrBadFrame) || !bytes.Contains([]byte(err.Error()), []byte(tc.err)) {
					t.Fatalf("err = %v, want ErrBadFrame with %q", err, tc.err)
				}
				if tc.abiErr != errors.Is(err, abi.ErrMalformedBatch) {
					t.Fatalf("err = %v: wraps abi.ErrMalformedBatch: %v, want %v", err, !tc.abiErr, tc.abiErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.kind != tc.want.kind || m.channel != tc.want.channel || m.wm != tc.want.wm {
				t.Fatalf("message = %+v, want %+v", m, tc.want)
			}
			if (m.barrier == nil) != (tc.want.barrier == nil) || m.barrier != nil && *m.barrier != *tc.want.barrier {
				t.Fatalf("barrier = %+v, want %+v", m.barrier, tc.want.barrier)
			}
			if tc.wantRec == nil {
				if m.batch != nil {
					t.Fatalf("message has a batch")
				}
				return
			}
			checkRecords(t, m.batch.Records, tc.wantRec)
		})
	}
}

func checkRecords(t *testing.T, got, want []stream.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Timestamp != w.Timestamp || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d = %+v, want %+v", i, g, w)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d = %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
			}
		}
	}
}

// TestMessageFrameRoundTrip: what a producer sends is what its consumer
// reads, through the protobuf encoding.
func TestMessageFrameRoundTrip(t *testing.T) {
	b := stream.NewBatch(4)
	b.Add([]byte("k"), []byte("v1"), 1)
	b.AddRecord(&stream.Record{Value: []byte("v2"), Timestamp: 2, Headers: []stream.Header{{Key: "a", Value: []byte("b")}}})
	for _, m := range []message{
		{kind: msgBatch, batch: b},
		{kind: msgWatermark, wm: 99},
		{kind: msgIdle},
		{kind: msgEOS},
		{kind: msgBarrier, barrier: &barrier{id: 42, triggered: 1234}},
		{kind: msgBarrier, barrier: &barrier{id: 43, savepoint: true}},
		{kind: msgBarrier, barrier: &barrier{id: 44, savepoint: true, triggered: 7, swapID: 2, swapNode: "count"}},
	} {
		wire, err := proto.Marshal(messageFrame(m))
		if err != nil {
			t.Fatal(err)
		}
		var f eddyv1.Frame
		if err := proto.Unmarshal(wire, &f); err != nil {
			t.Fatal(err)
		}
		got, err := frameMessage(&f, 5)
		if err != nil {
			t.Fatal(err)
		}
		if got.kind != m.kind || got.wm != m.wm || got.channel != 5 {
			t.Fatalf("%+v came back as %+v", m, got)
		}
		if m.barrier != nil && (got.barrier == nil || *got.barrier != *m.barrier) {
			t.Fatalf("barrier %+v came back as %+v", m.barrier, got.barrier)
		}
		if m.batch != nil {
			checkRecords(t, got.batch.Records, m.batch.Records)
			// The decoded batch owns the frame's bytes: adding to it must
			// not write over the records it holds.
			before := string(got.batch.Records[1].Value)
			got.batch.Add([]byte("kk"), []byte("overwrite?"), 3)
			if string(got.batch.Records[1].Value) != before {
				t.Fatalf("Add overwrote a decoded record: %q", got.batch.Records[1].Value)
			}
		}
	}
}

// FuzzFrameMessage feeds arbitrary bytes to the consumer's side as a
// TransferRequest (what the network hands the Exchange) and as a batch
// frame: never a panic, and a batch accepted re-encodes to records equal
// to the ones decoded.
func FuzzFrameMessage(f *testing.F) {
	good := abi.AppendBatch(nil, []stream.Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1, Headers: []stream.Header{{Key: "h", Value: []byte("x")}}}})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{})
	for _, fr := range []*eddyv1.Frame{batchFrame(good), {Kind: &eddyv1.Frame_Watermark{Watermark: -5}}, {Kind: &eddyv1.Frame_Idle{}},
		barrierFrame(3, 5, eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT), swapFrame(4, 5, 1, "n")} {
		wire, _ := proto.Marshal(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Frame{Frame: fr}})
		f.Add(wire)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req eddyv1.TransferRequest
		if proto.Unmarshal(data, &req) == nil {
			m, _, err := requestMessage(&req, 0)
			if err == nil && m.kind == msgBatch && m.batch.Len() == 0 {
				t.Fatal("an empty batch was accepted")
			}
			if err == nil && m.kind == msgBarrier && m.barrier.id <= 0 {
				t.Fatalf("barrier %d was accepted", m.barrier.id)
			}
			if err == nil && m.kind == msgBarrier && (m.barrier.swapNode == "") != (m.barrier.swapID == 0) {
				t.Fatalf("swap barrier %+v was accepted", m.barrier)
			}
		}
		m, err := frameMessage(batchFrame(data), 1)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v does not wrap ErrBadFrame", err)
			}
			return
		}
		again, err := abi.DecodeBatch(abi.AppendBatch(nil, m.batch.Records), nil)
		if err != nil {
			t.Fatalf("re-encoding an accepted batch: %v", err)
		}
		checkRecords(t, again, m.batch.Records)
	})
}
