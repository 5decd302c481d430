package abi

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// Version 6 (ABI.md, "Version 6: fields the host extracts"): a module
// declares, during eddy_open, the JSON paths it reads; the host then puts a
// field table after the entry table of every batch of eddy_process and
// eddy_process2, with each record's status and the span of each path.

// FieldsVersion is the least version of a module that imports ImportFields.
const FieldsVersion = 6

// ImportFields declares the module's field list (version 6).
const ImportFields = "fields" // (ptr i32, len i32) -> ()

// Limits of a field list.
const (
	MaxFieldPaths   = 64
	MaxFieldKeys    = 8
	MaxFieldListLen = 64 << 10
)

// FieldAbsent is the off of a path that is absent from a record.
const FieldAbsent = 0xFFFFFFFF

// FieldNumber, set in a path's key count (version 7), makes it a number
// path: its row entry is the value's float64, or FieldNoNumber.
const FieldNumber uint32 = 1 << 31

// FieldNoNumber is the row entry of a number path whose value is absent
// or not a JSON number (a quiet NaN; a guest may test for any NaN).
const FieldNoNumber uint64 = 0x7FF8000000000000

// FieldRowSize is the size of one row of the field table of a module that
// declared n paths.
func FieldRowSize(n int) int { return 4 + 8*n }

// FieldTableOffset is where the field table of a batch of count records
// starts.
func FieldTableOffset(count int) int { return HeaderSize + EntrySize*count }

// EncodeFieldList encodes paths as the argument of ImportFields. It does
// not check the limits: the host does, and its message is the one a module
// author sees.
func EncodeFieldList(paths [][]string) []byte { return EncodeFields(paths, nil) }

// EncodeFields encodes spans and then numbers, number paths (version 7),
// as one field list: row entry j is spans[j] for j < len(spans), then
// numbers[j-len(spans)].
func EncodeFields(spans, numbers [][]string) []byte {
	n := 4
	for _, p := range append(spans[:len(spans):len(spans)], numbers...) {
		n += 4
		for _, k := range p {
			n += 4 + len(k)
		}
	}
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(spans)+len(numbers)))
	for j, p := range append(spans[:len(spans):len(spans)], numbers...) {
		k := uint32(len(p))
		if j >= len(spans) {
			k |= FieldNumber
		}
		b = binary.LittleEndian.AppendUint32(b, k)
		for _, k := range p {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
			b = append(b, k...)
		}
	}
	return b
}

// Fields is a decoded field list: what the host extracts for one instance.
// It keeps scratch space, so one Fields serves one instance (one goroutine).
type Fields struct {
	paths  [][]string
	number []bool // number[j]: path j is a number path
	slot   []int  // path j's index among the distinct paths find looks for
	find   *jsonscan.Paths
	spans  []int // scratch: Find's (offset, length) pairs
}

// ParseFieldList decodes and checks the argument of ImportFields.
func ParseFieldList(b []byte) (*Fields, error) {
	le := binary.LittleEndian
	if len(b) > MaxFieldListLen {
		return nil, fmt.Errorf("field list of %d bytes is longer than %d", len(b), MaxFieldListLen)
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("field list of %d bytes has no path count", len(b))
	}
	n := le.Uint32(b)
	if n == 0 || n > MaxFieldPaths {
		return nil, fmt.Errorf("field list declares %d paths; want 1 to %d", n, MaxFieldPaths)
	}
	at := 4
	f := &Fields{}
	var distinct [][]string // the paths to look for, each once
	for p := range int(n) {
		if len(b)-at < 4 {
			return nil, fmt.Errorf("field list ends in path %d, before its key count", p)
		}
		k := le.Uint32(b[at:])
		at += 4
		number := k&FieldNumber != 0
		k &^= FieldNumber
		if k == 0 || k > MaxFieldKeys {
			return nil, fmt.Errorf("path %d has %d keys; want 1 to %d", p, k, MaxFieldKeys)
		}
		path := make([]string, k)
		for j := range path {
			if len(b)-at < 4 {
				return nil, fmt.Errorf("field list ends in key %d of path %d, before its length", j, p)
			}
			l := le.Uint32(b[at:])
			at += 4
			if uint64(len(b)-at) < uint64(l) {
				return nil, fmt.Errorf("key %d of path %d is %d bytes, past the end of the list", j, p, l)
			}
			key := b[at : at+int(l)]
			at += int(l)
			if !utf8.Valid(key) {
				return nil, fmt.Errorf("key %d of path %d is not UTF-8", j, p)
			}
			path[j] = string(key)
		}
		slot := len(distinct)
		for q, other := range f.paths {
			if slices.Equal(other, path) {
				if f.number[q] == number {
					return nil, fmt.Errorf("path %d (%s) repeats path %d", p, pathString(path), q)
				}
				slot = f.slot[q] // a path may be declared once of each kind
			}
		}
		if slot == len(distinct) {
			distinct = append(distinct, path)
		}
		f.paths = append(f.paths, path)
		f.number = append(f.number, number)
		f.slot = append(f.slot, slot)
	}
	if at != len(b) {
		return nil, fmt.Errorf("field list has %d bytes after its %d paths", len(b)-at, n)
	}
	f.find = jsonscan.NewPaths(distinct)
	f.spans = make([]int, 2*len(distinct))
	return f, nil
}

// Numbers reports whether the list declares a number path (version 7).
func (f *Fields) Numbers() bool { return slices.Contains(f.number, true) }

// Number reports whether path j is a number path.
func (f *Fields) Number(j int) bool { return f.number[j] }

func pathString(path []string) string {
	return fmt.Sprintf("%q", path)
}

// Paths returns the declared paths, in the order of the list.
func (f *Fields) Paths() [][]string { return f.paths }

// EncodedSize is the size of the batch EncodeBatch writes for recs.
func (f *Fields) EncodedSize(recs []Record) int {
	return EncodedSize(recs) + len(recs)*FieldRowSize(len(f.paths))
}

// EncodeBatch writes recs as the batch encoding does, with the field
// table after the entry table, into dst (at least EncodedSize(recs)
// bytes), and returns the number of bytes written. The spans are found in
// the copies of the values in dst.
func (f *Fields) EncodeBatch(dst []byte, recs []Record) int {
	row := FieldRowSize(len(f.paths))
	table := FieldTableOffset(len(recs))
	n := encodeBatch(dst, recs, table+row*len(recs))
	le := binary.LittleEndian
	for i := range recs {
		r := dst[table+row*i : table+row*(i+1)]
		off := int(le.Uint32(dst[HeaderSize+EntrySize*i+16:]))
		f.Extract(r, dst, off, off+len(recs[i].Value))
	}
	return n
}

// Extract fills one row of the field table (FieldRowSize bytes) for the
// value b[start:end], with offsets relative to b.
func (f *Fields) Extract(row, b []byte, start, end int) {
	le := binary.LittleEndian
	valid := f.find.Find(b[start:end], f.spans)
	if valid {
		le.PutUint32(row, 1)
	} else {
		le.PutUint32(row, 0)
	}
	for j, s := range f.slot {
		off, n := f.spans[2*s], f.spans[2*s+1]
		if f.number[j] {
			x := FieldNoNumber
			if off >= 0 {
				if v, ok := jsonscan.ParseNumber(b[start+off : start+off+n]); ok {
					x = math.Float64bits(v)
				}
			}
			le.PutUint64(row[4+8*j:], x)
			continue
		}
		if off < 0 {
			le.PutUint32(row[4+8*j:], FieldAbsent)
			le.PutUint32(row[8+8*j:], 0)
			continue
		}
		le.PutUint32(row[4+8*j:], uint32(start+off))
		le.PutUint32(row[8+8*j:], uint32(n))
	}
}
