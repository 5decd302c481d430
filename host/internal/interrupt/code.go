package interrupt

import (
	"errors"
	"fmt"
	"math"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// Opcodes that Instrument treats specially; the rest are only skipped.
const (
	opUnreachable = 0x00
	opBlock       = 0x02
	opLoop        = 0x03
	opIf          = 0x04
	opEnd         = 0x0b
	opLocalGet    = 0x20
	opLocalSet    = 0x21
	opLocalTee    = 0x22
	opGlobalGet   = 0x23
	opGlobalSet   = 0x24
	opMiscPrefix  = 0xfc
	opSIMDPrefix  = 0xfd
)

// exitMask sets how often guest code exits to Go (see the package
// documentation): when a function's iteration counter, incremented at the
// start of every loop body, has these bits clear.
//
// The counter is a local, so it stays in a register. It starts, at each
// entry into the function, from the tick global, which every such entry
// increments. A function's own loop thus exits every 1024 iterations. A
// loop that calls small looping functions, whose counters would never get
// that far from zero, exits at about the same rate in iterations and
// calls: as each entry advances the tick by one, the callees' short runs
// slide across the multiples of 1024. (Iterations are not added back to
// the tick: that would be a store per iteration, each chained to the
// last.) At worst, with calls patterned to keep missing the multiples, the
// outermost long-running loop still exits every 1024 of its iterations.
//
// An exit costs some tens of nanoseconds, a few hundredths of a
// nanosecond per iteration here. What costs more is the exit's mere
// presence: wazero's register allocator spills a loop's carried values at
// every iteration of a loop that contains a call, taken or not
// (BenchmarkLoops). Moving the exit out of the loop body, into a loop
// added around each loop, does not help (tried in 6b3a9ba, measured in
// docs/rfcs/2026-12-02-wasm-boundary.md): the allocator stores a spilled
// loop-carried value after each of its definitions, wherever the reload
// is, and the values are live across the call either way.
const exitMask = 1<<10 - 1

// bodyRewriter rewrites function bodies; its buffers are reused from one
// body to the next.
type bodyRewriter struct {
	flag, tick uint32 // indices of the added globals
	// globals is the number of globals the module had: an index beyond
	// would be invalid in the module as it came, but would name the flag
	// or the tick once they are added, and a guest that could write the
	// flag could clear it.
	globals uint32
	code    []byte // instrumented instructions of the current body
	out     []byte // the current body
	lin     []byte // the current body with its jumps linearized
}

// appendEntry appends what starts a function with loops: $tick++, and the
// iteration counter starts from there.
func (w *bodyRewriter) appendEntry(b []byte, counter uint32) []byte {
	b = wasmbin.AppendU32(append(b, opGlobalGet), w.tick)
	b = append(b, 0x41, 0x01, 0x6a) // i32.const 1; i32.add
	b = wasmbin.AppendU32(append(b, opLocalTee), counter)
	return wasmbin.AppendU32(append(b, opGlobalSet), w.tick)
}

// appendLoopCheck appends what starts every loop body: trap if the flag is
// set; count the iteration, and every exitMask+1 of them exit to Go. A
// zero-page memory.grow is the cheapest way there that needs no new
// import: wazero's compiler runs it in Go, where the goroutine can be
// preempted.
func (w *bodyRewriter) appendLoopCheck(b []byte, counter uint32) []byte {
	b = wasmbin.AppendU32(append(b, opGlobalGet), w.flag)
	b = append(b, opIf, 0x40, opUnreachable, opEnd)
	b = wasmbin.AppendU32(append(b, opLocalGet), counter)
	b = append(b, 0x41, 0x01, 0x6a) // i32.const 1; i32.add
	b = wasmbin.AppendU32(append(b, opLocalTee), counter)
	b = wasmbin.AppendS32(append(b, 0x41), exitMask)
	b = append(b, 0x71, 0x45, opIf, 0x40)       // i32.and; i32.eqz; if
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0; memory.grow; drop
	return append(b, opEnd)
}

// instrumentCode rewrites the code section's content, which r reads, and
// counts the loops. params holds the number of parameters of each defined
// function; importFuncs is the number of imported functions, for error
// messages.
func (w *bodyRewriter) instrumentCode(r wasmbin.Reader, params []uint32, importFuncs uint32) (out []byte, loops int, err error) {
	n, err := r.U32()
	if err != nil {
		return nil, 0, fmt.Errorf("function count: %w", err)
	}
	if uint64(n) != uint64(len(params)) {
		return nil, 0, fmt.Errorf("%d function bodies for %d functions", n, len(params))
	}
	out = wasmbin.AppendU32(make([]byte, 0, r.Size()+r.Size()/16+8), n)
	for i := uint32(0); i < n; i++ {
		fn := uint64(importFuncs) + uint64(i)
		size, err := r.U32()
		if err != nil {
			return nil, 0, fmt.Errorf("function %d: body size: %w", fn, err)
		}
		at := r.Offset()
		in, err := r.Bytes(size)
		if err != nil {
			return nil, 0, fmt.Errorf("function %d: body of %d bytes at %#x: %w", fn, size, at, err)
		}
		in, _ = linearizeJumps(in, &w.lin)
		body, found, err := w.instrumentBody(in, params[i])
		if err != nil {
			return nil, 0, fmt.Errorf("function %d (body at %#x): %w", fn, at, err)
		}
		loops += found
		if uint64(len(body)) > math.MaxUint32 {
			return nil, 0, fmt.Errorf("function %d: body too large once instrumented", fn)
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if !r.EOF() {
		return nil, 0, fmt.Errorf("%d bytes after the last function body", r.Len())
	}
	return out, loops, nil
}

// instrumentBody returns the function body in, of a function with params
// parameters, instrumented, and the number of its loops. A function with
// loops gets a local to count their iterations, started on entry from the
// tick, and the loop check after the block type of every loop. Everything else is copied
// as it is, so padded LEB128 numbers and the like survive. The result is
// valid until the next call.
func (w *bodyRewriter) instrumentBody(in []byte, params uint32) (_ []byte, loops int, err error) {
	r := wasmbin.NewReader(in) // so that Offset is an index into in
	groups, err := r.U32()
	if err != nil {
		return nil, 0, fmt.Errorf("locals: %w", err)
	}
	groupsEnd := r.Offset()
	locals := uint64(params)
	for i := uint32(0); i < groups; i++ {
		n, err := r.U32()
		if err != nil {
			return nil, 0, fmt.Errorf("locals: %w", err)
		}
		locals += uint64(n)
		if err := valueType(&r); err != nil {
			return nil, 0, fmt.Errorf("locals: %w", err)
		}
	}
	declared := in[groupsEnd:r.Offset()] // the local groups, as they came
	// The index of the local added if there are loops.
	counter, room := uint32(locals), locals < math.MaxUint32 && groups < math.MaxUint32

	code := w.code[:0]
	depth := 0           // of blocks, loops and ifs open inside the function's own block
	copied := r.Offset() // in[:copied] is in code already, or is the locals vector
	for {
		at := r.Offset()
		op, err := r.Byte()
		if err != nil {
			return nil, 0, errors.New("the body ends before the end of its expression")
		}
		switch op {
		case opBlock, opIf:
			err = blockType(&r)
			depth++
		case opLoop:
			if !room {
				err = errors.New("too many locals to add one")
			} else if err = blockType(&r); err == nil {
				code = append(code, in[copied:r.Offset()]...)
				code = w.appendLoopCheck(code, counter)
				copied = r.Offset()
				loops++
			}
			depth++
		case opGlobalGet, opGlobalSet:
			var idx uint32
			if idx, err = r.U32(); err == nil && idx >= w.globals {
				err = fmt.Errorf("global %d does not exist (the module has %d)", idx, w.globals)
			}
		case opLocalGet, opLocalSet, opLocalTee:
			// As for globals: the next index will be the iteration
			// counter, and a guest that reset it would never exit to Go.
			var idx uint32
			if idx, err = r.U32(); err == nil && uint64(idx) >= locals {
				err = fmt.Errorf("local %d does not exist (the function has %d)", idx, locals)
			}
		case opEnd:
			if depth > 0 {
				depth--
				break
			}
			if !r.EOF() {
				return nil, 0, fmt.Errorf("%d bytes after the end of the body's expression", r.Len())
			}
			w.code = append(code, in[copied:]...)
			if loops == 0 {
				return in, 0, nil
			}
			// locals: the groups as they came, then (local i32)
			out := wasmbin.AppendU32(w.out[:0], groups+1)
			out = append(out, declared...)
			out = append(out, 0x01, wasmbin.I32)
			out = w.appendEntry(out, counter)
			w.out = append(out, w.code...)
			return w.out, loops, nil
		default:
			err = immediates(&r, op)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("instruction %s at body offset %#x: %w", opName(in, at), at, err)
		}
	}
}

// immediates skips the immediates of every instruction other than block,
// loop, if and end, and refuses an opcode it does not know.
func immediates(r *wasmbin.Reader, op byte) error {
	var err error
	switch {
	case op == opUnreachable, op == 0x01, // nop
		op == 0x05,             // else
		op == 0x0f,             // return
		op == 0x1a, op == 0x1b, // drop, select
		0x45 <= op && op <= 0xc4, // numeric, with sign extension (0xc0-0xc4)
		op == 0xd1:               // ref.is_null
		return nil
	case op == 0x0c, op == 0x0d, // br, br_if
		op == 0x10,               // call
		0x20 <= op && op <= 0x22, // local.get/set/tee
		op == 0x23, op == 0x24,   // global.get/set
		op == 0x25, op == 0x26, // table.get/set
		op == 0xd2: // ref.func
		_, err = r.U32()
	case op == 0x0e: // br_table
		var n uint32
		if n, err = r.U32(); err != nil {
			return err
		}
		for i := uint64(0); i <= uint64(n) && err == nil; i++ { // n labels and the default
			_, err = r.U32()
		}
	case op == 0x11: // call_indirect type table
		if _, err = r.U32(); err == nil {
			_, err = r.U32()
		}
	case op == 0x1c: // select with types
		// wazero reads the vector length as one byte and allows only 1.
		if err = r.Expect(0x01, "the type count of a typed select"); err == nil {
			err = numOrRefType(r)
		}
	case 0x28 <= op && op <= 0x3e: // loads and stores
		err = memarg(r)
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		err = r.Expect(0x00, "the memory index")
	case op == 0x41: // i32.const
		_, err = r.S32()
	case op == 0x42: // i64.const
		_, err = r.S64()
	case op == 0x43: // f32.const
		err = r.Skip(4)
	case op == 0x44: // f64.const
		err = r.Skip(8)
	case op == 0xd0: // ref.null
		var t byte
		if t, err = r.Byte(); err == nil && t != wasmbin.FuncRef && t != wasmbin.ExternRef {
			err = fmt.Errorf("unsupported reference type %#x", t)
		}
	case op == opMiscPrefix:
		err = miscImmediates(r)
	case op == opSIMDPrefix:
		err = simdImmediates(r)
	default:
		err = errors.New("unknown or unsupported opcode")
	}
	return err
}

// miscImmediates skips a 0xfc instruction: saturating truncation, bulk
// memory and table operations.
func miscImmediates(r *wasmbin.Reader) error {
	sub, err := r.U32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // trunc_sat
		return nil
	case sub == 8: // memory.init data memory
		if _, err = r.U32(); err == nil {
			err = r.Expect(0x00, "the memory index")
		}
	case sub == 9, sub == 13, 15 <= sub && sub <= 17: // data.drop, elem.drop, table.grow/size/fill
		_, err = r.U32()
	case sub == 10: // memory.copy dst src
		if err = r.Expect(0x00, "the memory index"); err == nil {
			err = r.Expect(0x00, "the memory index")
		}
	case sub == 11: // memory.fill
		err = r.Expect(0x00, "the memory index")
	case sub == 12, sub == 14: // table.init elem table, table.copy dst src
		if _, err = r.U32(); err == nil {
			_, err = r.U32()
		}
	default:
		err = fmt.Errorf("unknown or unsupported 0xfc sub-opcode %d", sub)
	}
	return err
}

// reservedSIMD are the opcodes in 0..255 that the SIMD instruction set
// leaves unassigned.
var reservedSIMD = [256]bool{
	0x9a: true, 0xa2: true, 0xa5: true, 0xa6: true, 0xaf: true, 0xb0: true,
	0xb2: true, 0xb3: true, 0xb4: true, 0xbb: true, 0xc2: true, 0xc5: true,
	0xc6: true, 0xcf: true, 0xd0: true, 0xd2: true, 0xd3: true, 0xd4: true,
	0xe2: true, 0xee: true,
}

// simdImmediates skips a 0xfd instruction.
//
// The sub-opcode is a LEB128 u32, but wazero reads it as one byte: for
// opcodes 128..255 it takes the first byte of their two-byte encoding as
// the opcode and the second, 0x01, as a nop. The two readings agree on
// where instructions end only for those canonical encodings, so no other
// is accepted: code that wazero decodes differently could hide a loop.
func simdImmediates(r *wasmbin.Reader) error {
	sub, err := r.Byte()
	if err != nil {
		return err
	}
	if sub >= 0x80 {
		if err := r.Expect(0x01, "the second byte of a SIMD opcode"); err != nil {
			return err
		}
	}
	if reservedSIMD[sub] {
		return fmt.Errorf("unknown SIMD opcode %#x", sub)
	}
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		return memarg(r)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		return r.Skip(16)
	case 21 <= sub && sub <= 34: // extract_lane, replace_lane
		return r.Skip(1)
	case 84 <= sub && sub <= 91: // load_lane, store_lane
		if err := memarg(r); err != nil {
			return err
		}
		return r.Skip(1)
	default:
		return nil
	}
}

// blockType skips the type of a block, loop or if: empty (0x40), one
// value type, or the index of a function type, all read as a signed
// LEB128 s33 as wazero does.
func blockType(r *wasmbin.Reader) error {
	v, err := r.S33()
	if err != nil {
		return err
	}
	switch {
	case v >= 0: // type index
		return nil
	case v == -0x40: // empty
		return nil
	case v == -1, v == -2, v == -3, v == -4, v == -5: // i32 i64 f32 f64 v128
		return nil
	case v == -0x10, v == -0x11: // funcref externref
		return nil
	default:
		return fmt.Errorf("unsupported block type %d", v)
	}
}

// numOrRefType reads a value type of the CoreFeaturesV2 instruction set.
func numOrRefType(r *wasmbin.Reader) error {
	t, err := r.Byte()
	if err != nil {
		return err
	}
	switch t {
	case wasmbin.I32, wasmbin.I64, wasmbin.F32, wasmbin.F64, wasmbin.V128, wasmbin.FuncRef, wasmbin.ExternRef:
		return nil
	default:
		return fmt.Errorf("unsupported value type %#x", t)
	}
}

func memarg(r *wasmbin.Reader) error {
	if _, err := r.U32(); err != nil { // alignment
		return err
	}
	_, err := r.U32() // offset
	return err
}

// opName renders the opcode at in[at] for an error message, with its
// sub-opcode byte when it has a prefix.
func opName(in []byte, at int) string {
	op := in[at]
	if op >= opMiscPrefix && at+1 < len(in) { // 0xfc, 0xfd, 0xfe

		return fmt.Sprintf("%#x %#x", op, in[at+1])
	}
	return fmt.Sprintf("%#x", op)
}
