package interrupt

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// Local indices of goShaped: the parameter n, then $pc, acc and i.
const (
	gsN, gsPC, gsAcc, gsI = 0x00, 0x01, 0x02, 0x03
)

// jump is Go's jump to the basic block at resume point k from code at
// block depth d below the dispatch loop: i32.const k; local.set $pc; br d.
func jump(k, d byte) []byte { return []byte{0x41, k, opLocalSet, gsPC, 0x0c, d} }

// goShaped is a function laid out as Go's WebAssembly backend lays out
// every function (see linearizeJumps), computing the sum over i in [0, n)
// of 3 for odd i and 1 for even i, through forward jumps (three) and
// backward ones (two, the loop's):
//
//	seg0: acc, i = 0, 0; goto seg1
//	seg1: if i >= n goto seg4; if i&1 goto seg3
//	seg2: acc += 1; i++; goto seg1
//	seg3: acc += 3; i++; goto seg1
//	seg4: return acc
var goShaped = body([]byte{0x01, 0x03, i32}, []byte{
	opLoop, 0x40,
	opBlock, 0x40, opBlock, 0x40, opBlock, 0x40, opBlock, 0x40, opBlock, 0x40,
	opLocalGet, gsPC,
	0x0e, 0x05, 0x00, 0x01, 0x02, 0x03, 0x04, 0x00, // br_table 0 1 2 3 4 (default 0)
	opEnd, // seg0
	0x41, 0x00, opLocalSet, gsAcc, 0x41, 0x00, opLocalSet, gsI,
}, jump(1, 4), []byte{
	opEnd,                                              // seg1
	opLocalGet, gsI, opLocalGet, gsN, 0x4e, opIf, 0x40, // i32.ge_s; if
}, jump(4, 4), []byte{
	opEnd,
	opLocalGet, gsI, 0x41, 0x01, 0x71, opIf, 0x40, // i32.and; if
}, jump(3, 4), []byte{
	opEnd,
	opEnd, // seg2
	opLocalGet, gsAcc, 0x41, 0x01, 0x6a, opLocalSet, gsAcc,
	opLocalGet, gsI, 0x41, 0x01, 0x6a, opLocalSet, gsI,
}, jump(1, 2), []byte{
	opEnd, // seg3
	opLocalGet, gsAcc, 0x41, 0x03, 0x6a, opLocalSet, gsAcc,
	opLocalGet, gsI, 0x41, 0x01, 0x6a, opLocalSet, gsI,
}, jump(1, 1), []byte{
	opEnd,                   // seg4
	opLocalGet, gsAcc, 0x0f, // return
	opEnd, // the dispatch loop
	opUnreachable,
})

func TestLinearizeJumps(t *testing.T) {
	var scratch []byte
	out, n := linearizeJumps(goShaped, &scratch)
	if n != 3 {
		t.Fatalf("%d jumps rewritten, want the 3 forward ones", n)
	}
	// Each forward jump now branches to the end of its target's block:
	// from seg0 to seg1 over no block, from inside seg1's ifs to seg4 and
	// seg3 over two and one.
	for _, want := range [][]byte{
		append(jump(1, 0), opEnd), // seg0's, before seg1's end
		append(jump(4, 3), opEnd),
		append(jump(3, 2), opEnd),
		append(jump(1, 2), opEnd), // the backward ones stay
		append(jump(1, 1), opEnd),
	} {
		if !bytes.Contains(out, want) {
			t.Errorf("rewritten body lacks % x:\n% x", want, out)
		}
	}
	if len(out) != len(goShaped) {
		t.Errorf("body of %d bytes became %d; only one-byte depths changed", len(goShaped), len(out))
	}

	// The same results, instrumented (linearized and loop-checked) or not.
	mod := testModule{
		types:   [][]byte{funcType([]byte{i32}, []byte{i32})},
		funcs:   []byte{0},
		memory:  []byte{0x00, 0x00},
		exports: [][]byte{export("f", wasmbin.KindFunc, 0)},
		bodies:  [][]byte{goShaped},
	}
	instrumented, err := Instrument(mod.bytes())
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t)
	ctx := context.Background()
	for i, wasm := range [][]byte{mod.bytes(), instrumented} {
		m, err := r.Instantiate(ctx, wasm)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2]uint64{{0, 0}, {1, 1}, {2, 4}, {10, 20}, {3001, 6001}} {
			got, err := m.ExportedFunction("f").Call(ctx, c[0])
			if err != nil || got[0] != c[1] {
				t.Errorf("module %d: f(%d) = %v, %v; want %d", i, c[0], got, err, c[1])
			}
		}
	}
}

// TestLinearizeLeavesOtherShapesAlone: bodies that do not start as Go's
// do, or whose dispatch does not decode, come back as they are.
func TestLinearizeLeavesOtherShapesAlone(t *testing.T) {
	table := bytes.Index(goShaped, []byte{0x0e, 0x05})
	for name, b := range map[string][]byte{
		"triangle (a plain loop)": spinModule.bodies[1],
		"no locals, no loop":      body(noLocals, []byte{0x41, 0x00, 0x1a}),
		// a table label past the blocks: the loop itself
		"label past the blocks": bytes.Replace(goShaped, goShaped[table:table+8], []byte{0x0e, 0x05, 0x00, 0x01, 0x02, 0x03, 0x05, 0x00}, 1),
		// the br after a set of another local is not a jump
		"set of another local": bytes.Replace(goShaped, jump(1, 4), []byte{0x41, 0x01, opLocalSet, gsAcc, 0x0c, 0x04}, 1),
		"truncated":            goShaped[:len(goShaped)/2],
	} {
		var scratch []byte
		out, n := linearizeJumps(b, &scratch)
		switch name {
		case "set of another local":
			if n != 2 { // the two other forward jumps
				t.Errorf("%s: %d jumps rewritten, want 2", name, n)
			}
			continue
		}
		if n != 0 || !bytes.Equal(out, b) {
			t.Errorf("%s: %d jumps rewritten; want the body unchanged", name, n)
		}
	}
}

// TestLinearizeGoFixtures: the shape linearizeJumps looks for is the one
// the Go toolchain that builds the fixtures emits. If a new Go release
// lays functions out differently, this fails rather than the guests
// silently losing the speed-up.
func TestLinearizeGoFixtures(t *testing.T) {
	for _, path := range testkit.WasmModules(t) {
		if !strings.HasSuffix(filepath.Base(path), "-go.wasm") {
			continue
		}
		wasm, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parse(wasm)
		if err != nil {
			t.Fatal(err)
		}
		funcs, shaped, jumps := 0, 0, 0
		for _, s := range m.sections {
			if s.ID != wasmbin.SectionCode {
				continue
			}
			r := s.Reader()
			count, err := r.U32()
			if err != nil {
				t.Fatal(err)
			}
			var scratch []byte
			for i := uint32(0); i < count; i++ {
				size, err := r.U32()
				if err != nil {
					t.Fatal(err)
				}
				in, err := r.Bytes(size)
				if err != nil {
					t.Fatal(err)
				}
				var k int
				if _, k = linearizeJumps(in, &scratch); k > 0 {
					shaped++
				}
				funcs++
				jumps += k
			}
		}
		t.Logf("%s: %d of %d functions, %d jumps", filepath.Base(path), shaped, funcs, jumps)
		if shaped < funcs/2 || jumps < 5*shaped {
			t.Errorf("%s: only %d of %d functions linearized (%d jumps): is this still Go's layout?", filepath.Base(path), shaped, funcs, jumps)
		}
	}
}
