package wasmbin

import "fmt"

// Value types, each one byte. RefNull and Ref, of the typed function
// references proposal (which wazero decodes), are prefixes: a heap type
// follows them.
const (
	I32       = 0x7f
	I64       = 0x7e
	F32       = 0x7d
	F64       = 0x7c
	V128      = 0x7b
	FuncRef   = 0x70
	ExternRef = 0x6f
	ExnRef    = 0x69
	RefNull   = 0x63 // (ref null heaptype)
	Ref       = 0x64 // (ref heaptype)
)

// FuncForm is the byte that starts a function type in the type section.
const FuncForm = 0x60

// Kinds of imports and exports.
const (
	KindFunc   = 0x00
	KindTable  = 0x01
	KindMemory = 0x02
	KindGlobal = 0x03
	KindTag    = 0x04
)

// ValueType reads a value type and returns its first byte, having skipped
// the heap type (a signed 33-bit LEB128 number) that follows RefNull or
// Ref. It does not judge whether the byte names a type: which ones a
// caller accepts depends on what it reads for.
func (r *Reader) ValueType() (byte, error) {
	t, err := r.Byte()
	if err != nil {
		return 0, err
	}
	if t == RefNull || t == Ref {
		if _, err := r.S33(); err != nil {
			return 0, err
		}
	}
	return t, nil
}

// Flags of limits.
const (
	LimitsHasMax = 0x01 // a maximum follows the minimum
	LimitsShared = 0x02 // a shared memory (threads proposal)
	Limits64     = 0x04 // a 64-bit memory (memory64 proposal): the numbers are u64
)

// Limits are the limits of a table or memory type.
type Limits struct {
	Flags byte
	Min   uint64
	Max   uint64 // if Flags has LimitsHasMax
}

// Limits reads the limits of a table or memory type: flags, minimum and,
// if the flags say so, maximum. It refuses flags that no proposal
// defines; which of the others a caller accepts is for it to say.
func (r *Reader) Limits() (Limits, error) {
	flags, err := r.Byte()
	if err != nil {
		return Limits{}, err
	}
	if flags > LimitsHasMax|LimitsShared|Limits64 {
		return Limits{}, fmt.Errorf("unknown limits flags %#x", flags)
	}
	l := Limits{Flags: flags}
	if l.Min, err = r.limit(flags); err != nil {
		return Limits{}, err
	}
	if flags&LimitsHasMax != 0 {
		if l.Max, err = r.limit(flags); err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

func (r *Reader) limit(flags byte) (uint64, error) {
	if flags&Limits64 != 0 {
		return r.U64()
	}
	v, err := r.U32()
	return uint64(v), err
}
