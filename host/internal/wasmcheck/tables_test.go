package wasmcheck

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

func TestCapTables(t *testing.T) {
	module := func(sections ...[]byte) []byte {
		out := []byte(wasmbin.Header)
		for _, s := range sections {
			out = append(out, s...)
		}
		return out
	}
	table := func(content ...byte) []byte { return wasmbin.AppendSection(nil, wasmbin.SectionTable, content) }
	memory := wasmbin.AppendSection(nil, wasmbin.SectionMemory, []byte{1, 0, 1})
	for _, tc := range []struct {
		name   string
		in     []byte
		limit  uint64
		want   []byte // nil: unchanged
		errMsg string
	}{
		{name: "no table", in: module(memory), limit: 100},
		{name: "max within the limit", in: module(table(1, 0x70, 1, 2, 10), memory), limit: 100},
		{name: "no max", in: module(table(1, 0x70, 0, 2), memory), limit: 100,
			want: module(table(1, 0x70, 1, 2, 100), memory)},
		{name: "max over the limit", in: module(table(1, 0x70, 1, 0, 0xff, 0xff, 0x03)), limit: 100,
			want: module(table(1, 0x70, 1, 0, 100))},
		{name: "two tables share the room", in: module(table(2, 0x70, 0, 10, 0x6f, 0, 0)), limit: 100,
			want: module(table(2, 0x70, 1, 10, 55, 0x6f, 1, 0, 45))},
		{name: "one table's own max leaves the other its share", in: module(table(2, 0x70, 1, 0, 5, 0x70, 0, 0)), limit: 100,
			want: module(table(2, 0x70, 1, 0, 5, 0x70, 1, 0, 50))},
		{name: "initialized table", in: module(table(1, 0x40, 0, 0x70, 0, 1, 0xd0, 0x70, 0x0b)), limit: 100,
			want: module(table(1, 0x40, 0, 0x70, 1, 1, 100, 0xd0, 0x70, 0x0b))},
		{name: "minimums over the limit", in: module(table(1, 0x70, 0, 101)), limit: 100,
			errMsg: "the tables' minimums are 101 elements in all, over the limit of 100"},
		{name: "truncated", in: module(table(1, 0x70)), limit: 100, errMsg: "table section: table 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, capped, err := CapTables(tc.in, tc.limit)
			if tc.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("CapTables = %v, want an error containing %q", err, tc.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = tc.in
			}
			if capped != (tc.want != nil) || !bytes.Equal(got, want) {
				t.Errorf("CapTables = %x, %v; want %x, %v", got, capped, want, tc.want != nil)
			}
		})
	}
	var limitErr *limitError
	if _, _, err := CapTables([]byte(wasmbin.Header+"\x04\x04\x01\x70\x00\x65"), 100); !errors.As(err, &limitErr) {
		t.Errorf("minimums over the limit: %v is not a limit error", err)
	}
}
