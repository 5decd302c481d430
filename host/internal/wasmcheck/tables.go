package wasmcheck

import (
	"fmt"

	"github.com/eddy-stream/eddy/host/internal/wasmbin"
)

// CapTables returns wasm with the maximum of every table it defines
// lowered, where needed, so that its tables can never hold more than
// limit elements in all: table.grow beyond the maximum fails (returns -1,
// as the spec allows any table.grow to), so a module cannot grow them at
// run time past what Check holds their minimums to. wazero has no option
// that bounds tables: it grows them while the module's own maximum allows,
// and a table without one up to 2^32-1 elements of 8 bytes.
//
// Each table keeps its minimum and gets an equal share of the room the
// minimums leave, unless its own maximum is lower: a module with one table
// (what compilers make) may grow it to limit. A module that needs no
// change is returned as it is; otherwise the result is a new slice. wasm
// must have passed Check with Limits.TableElements of at most limit.
//
// Imported tables are not touched: the exporter owns them, and the host
// exports none.
func CapTables(wasm []byte, limit uint64) (_ []byte, capped bool, err error) {
	if len(wasm) < len(wasmbin.Header) {
		return nil, false, fmt.Errorf("%w: no header", ErrMalformed)
	}
	r := wasmbin.NewReaderAt(wasm[len(wasmbin.Header):], len(wasmbin.Header))
	for !r.EOF() {
		s, err := r.Section()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if s.ID != wasmbin.SectionTable {
			continue
		}
		content, capped, err := capTableSection(s, limit)
		if err != nil || !capped {
			return wasm, false, err
		}
		out := make([]byte, 0, len(wasm)+len(content)-len(s.Content)+8)
		out = append(out, wasm[:s.Offset]...)
		out = wasmbin.AppendSection(out, wasmbin.SectionTable, content)
		return append(out, wasm[s.Offset+len(s.Raw):]...), true, nil
	}
	return wasm, false, nil
}

// tableEntry is one table type of a table section, split where the
// maximum goes.
type tableEntry struct {
	head   []byte // the 0x40 0x00 prefix, if any, and the reference type
	limits wasmbin.Limits
	tail   []byte // the initializer expression, if any
}

func capTableSection(s wasmbin.Section, limit uint64) ([]byte, bool, error) {
	r := s.Reader()
	n, err := r.U32()
	if err != nil {
		return nil, false, fmt.Errorf("%w: table section: %v", ErrMalformed, err)
	}
	if uint64(n) > uint64(r.Len()) {
		return nil, false, fmt.Errorf("%w: table section declares %d tables in %d bytes", ErrMalformed, n, r.Len())
	}
	entries := make([]tableEntry, n)
	var minimums uint64
	for i := range entries {
		e, err := readTable(&r)
		if err != nil {
			return nil, false, fmt.Errorf("%w: table section: table %d: %v", ErrMalformed, i, err)
		}
		entries[i] = e
		minimums += e.limits.Min
	}
	if minimums > limit {
		return nil, false, &limitError{fmt.Sprintf("table section: the tables' minimums are %d elements in all, over the limit of %d",
			minimums, limit)}
	}
	if n == 0 {
		return nil, false, nil
	}
	share := (limit - minimums) / uint64(n)
	capped := false
	for i := range entries {
		l := &entries[i].limits
		if most := l.Min + share; l.Flags&wasmbin.LimitsHasMax == 0 || l.Max > most {
			l.Flags |= wasmbin.LimitsHasMax
			l.Max = most
			capped = true
		}
	}
	if !capped {
		return nil, false, nil
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(s.Content)+5*int(n)), n)
	for _, e := range entries {
		out = append(out, e.head...)
		out = append(out, e.limits.Flags)
		out = wasmbin.AppendU32(out, uint32(e.limits.Min))
		out = wasmbin.AppendU32(out, uint32(e.limits.Max))
		out = append(out, e.tail...)
	}
	return out, true, nil
}

func readTable(r *wasmbin.Reader) (tableEntry, error) {
	start := r.Offset()
	rest := r.Rest()
	initialized := false
	if t, err := r.Peek(); err == nil && t == 0x40 {
		initialized = true
		if err := r.Skip(2); err != nil {
			return tableEntry{}, err
		}
	}
	if _, err := r.ValueType(); err != nil {
		return tableEntry{}, err
	}
	e := tableEntry{head: rest[:r.Offset()-start]}
	var err error
	if e.limits, err = r.Limits(); err != nil {
		return tableEntry{}, err
	}
	if e.limits.Flags&^wasmbin.LimitsHasMax != 0 {
		return tableEntry{}, fmt.Errorf("table limits flags %#x are not 0 or 1", e.limits.Flags)
	}
	if initialized {
		exprStart := r.Offset()
		exprRest := r.Rest()
		if err := constExpr(r); err != nil {
			return tableEntry{}, err
		}
		e.tail = exprRest[:r.Offset()-exprStart]
	}
	return e, nil
}
