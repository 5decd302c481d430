package interrupt

import (
	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// Go's WebAssembly backend compiles every jump between basic blocks into
//
//	i32.const K; local.set $pc; br $dispatch
//
// where $dispatch is a loop around the whole function body that starts
// with a br_table on $pc: the function is laid out as
//
//	[block]                ;; the unwind exit, when the function calls
//	loop                   ;; $dispatch
//	  block ... block      ;; m blocks, one per resume point
//	    local.get $pc
//	    br_table ...       ;; resume point K -> block label(K)
//	  end                  ;; segment 0
//	  ...
//	  end                  ;; segment 1
//	  ...                  ;; and so on: segment s starts where block s ends
//	end
//
// so that a goroutine can resume anywhere after the stack was unwound.
// Every taken branch thus runs as a loop iteration, with this package's
// loop check, and an indirect jump through the table. linearizeJumps
// rewrites the br of a jump to a later segment into a br to the end of
// that segment's block, which encloses the jump: the same target, straight.
// $pc is still set, so the code stays correct if anything reads it. Jumps
// back, to an earlier segment or to the start of their own, still go round
// the loop, and keep the loop check. Functions of any other shape are left
// as they are. It returns the rewritten body, built in *scratch (or in
// itself when nothing changed), and the number of jumps rewritten.
func linearizeJumps(in []byte, scratch *[]byte) ([]byte, int) {
	r := wasmbin.NewReader(in)
	groups, err := r.U32()
	if err != nil {
		return in, 0
	}
	for i := uint32(0); i < groups; i++ {
		if _, err := r.U32(); err != nil {
			return in, 0
		}
		if valueType(&r) != nil {
			return in, 0
		}
	}
	// The prologue: [block 0x40] loop 0x40 block 0x40 × m local.get $pc br_table … end
	b := r.Rest()
	i := 0
	// Go caches the stack pointer global in a local first.
	if pr := wasmbin.NewReader(b); len(b) > 0 && b[0] == opGlobalGet {
		pr.Byte()
		if _, err := pr.U32(); err == nil {
			if op, err := pr.Byte(); err == nil && op == opLocalSet {
				if _, err := pr.U32(); err == nil {
					i = pr.Offset()
				}
			}
		}
	}
	if i+1 < len(b) && b[i] == opBlock && b[i+1] == 0x40 {
		i += 2
	}
	if !(i+1 < len(b) && b[i] == opLoop && b[i+1] == 0x40) {
		return in, 0
	}
	i += 2
	m := 0
	for i+1 < len(b) && b[i] == opBlock && b[i+1] == 0x40 {
		i += 2
		m++
	}
	if m == 0 || i >= len(b) || b[i] != opLocalGet {
		return in, 0
	}
	pr := wasmbin.NewReader(b[i+1:])
	pc, err := pr.U32()
	if err != nil {
		return in, 0
	}
	if op, err := pr.Byte(); err != nil || op != 0x0e {
		return in, 0
	}
	n, err := pr.U32()
	if err != nil || n > 1<<16 {
		return in, 0
	}
	labels := make([]uint32, n+1)
	for j := range labels {
		if labels[j], err = pr.U32(); err != nil || labels[j] >= uint32(m) {
			return in, 0
		}
	}
	if op, err := pr.Byte(); err != nil || op != opEnd {
		return in, 0
	}
	// code: what follows the first end, i.e. segment 0 onwards.
	start := len(in) - len(b) + i + 1 + pr.Offset()
	cr := wasmbin.NewReader(in[start:])
	out := append((*scratch)[:0], in[:start]...)
	defer func() { *scratch = out[:0] }()
	copied := 0 // in[start:start+copied] is in out
	seg := 0
	inner := 0
	// the last two instructions: i32.const K, local.set $pc
	var constK int64 = -1
	constAt, setAt := -2, -2 // instruction index of each
	idx := 0
	rewritten := 0
	for !cr.EOF() {
		at := cr.Offset()
		op, err := cr.Byte()
		if err != nil {
			return in, 0
		}
		idx++
		switch op {
		case opBlock, opLoop, opIf:
			if blockType(&cr) != nil {
				return in, 0
			}
			inner++
		case opEnd:
			if inner > 0 {
				inner--
			} else if seg < m-1 {
				seg++
			} else {
				// the end of the dispatch loop: nothing more to do
				if rewritten == 0 {
					return in, 0
				}
				out = append(out, in[start+copied:]...)
				return out, rewritten
			}
		case 0x41: // i32.const
			v, err := cr.S32()
			if err != nil {
				return in, 0
			}
			constK, constAt = int64(v), idx
		case opLocalSet:
			x, err := cr.U32()
			if err != nil {
				return in, 0
			}
			if x == pc && constAt == idx-1 {
				setAt = idx
			}
		case 0x0c: // br
			d, err := cr.U32()
			if err != nil {
				return in, 0
			}
			if seg < m && setAt == idx-1 && constAt == idx-2 && d == uint32(inner+(m-1-seg)) && constK >= 0 {
				k := labels[len(labels)-1]
				if uint64(constK) < uint64(n) {
					k = labels[constK]
				}
				if int(k) > seg {
					out = append(out, in[start+copied:start+at]...)
					out = append(out, 0x0c)
					out = wasmbin.AppendU32(out, uint32(inner+int(k)-1-seg))
					copied = cr.Offset()
					rewritten++
				}
			}
		default:
			if immediates(&cr, op) != nil {
				return in, 0
			}
		}
	}
	return in, 0
}
