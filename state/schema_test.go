package state

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"
)

// TestValueSchema: the schema version is stored beside a value, on both
// backends: ValueGet returns the bytes alone, ValueGetSchema the bytes and
// the version; ValuePut writes schema 0; expiry works as without a schema;
// a snapshot and restore keeps the version.
func TestValueSchema(t *testing.T) {
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			clock := newFakeClock()
			e := &env{t: t, kind: bk, backend: bk.open(t, clock.now), clock: clock}
			s := e.openAll()
			cases := []struct {
				name   string
				key    string
				val    string
				ttl    time.Duration
				schema uint32
			}{
				{"plain", "a", "8 bytes!", 0, 0},
				{"schema 1", "b", `{"n":5}`, 0, 1},
				{"schema and ttl", "c", `{"n":6}`, time.Hour, 7},
				{"largest schema", "d", "x", 0, math.MaxUint32},
				{"empty value", "e", "", 0, 3},
			}
			for _, c := range cases {
				must(t, s.ValuePutSchema("count", []byte(c.key), nil, []byte(c.val), c.ttl, c.schema))
			}
			check := func(what string, s Store) {
				t.Helper()
				for _, c := range cases {
					v, schema, ok, err := s.ValueGetSchema("count", []byte(c.key), nil, []byte("dst:"))
					must(t, err)
					if !ok || string(v) != "dst:"+c.val || schema != c.schema {
						t.Errorf("%s: %s: ValueGetSchema = %q, %d, %v; want %q, %d", what, c.name, v, schema, ok, "dst:"+c.val, c.schema)
					}
					if got, ok := getValue(t, s, "count", c.key, ""); !ok || got != c.val {
						t.Errorf("%s: %s: ValueGet = %q, %v; want the bytes alone, %q", what, c.name, got, ok, c.val)
					}
				}
			}
			check("written", s)

			// Rewriting with ValuePut (what an ABI version < 4 module does)
			// makes it schema 0 again.
			must(t, s.ValuePut("count", []byte("b"), nil, []byte("raw"), 0))
			if _, schema, _, err := s.ValueGetSchema("count", []byte("b"), nil, nil); err != nil || schema != 0 {
				t.Errorf("after ValuePut: schema %d, %v; want 0", schema, err)
			}
			must(t, s.ValuePutSchema("count", []byte("b"), nil, []byte(`{"n":5}`), 0, 1))

			if _, schema, ok, err := s.ValueGetSchema("count", []byte("absent"), nil, nil); err != nil || ok || schema != 0 {
				t.Errorf("absent value: schema %d, %v, %v", schema, ok, err)
			}

			other := e.open(Scope{"default", "job-2", "op"}, Range{0, testMaxP})
			must(t, other.Restore(entries(snapshot(t, s))))
			check("restored", other)

			clock.advance(2 * time.Hour)
			if _, _, ok, err := s.ValueGetSchema("count", []byte("c"), nil, nil); err != nil || ok {
				t.Errorf("value with a schema past its TTL: %v, %v", ok, err)
			}
		})
	}
}

// TestValueEncoding pins the stored bytes: a schema-0 value is byte for
// byte what format 1 stored (so every existing value and checkpoint reads
// back unchanged), and a schema is a flag and a uvarint after the expiry.
func TestValueEncoding(t *testing.T) {
	cases := []struct {
		name      string
		expiresAt int64
		schema    uint32
		want      []byte
	}{
		{"format 1 plain", noExpiry, 0, []byte{0x00, 'v'}},
		{"format 1 expiry", 0x0102030405060708, 0, []byte{0x01, 1, 2, 3, 4, 5, 6, 7, 8, 'v'}},
		{"schema 1", noExpiry, 1, []byte{0x02, 0x01, 'v'}},
		{"schema 300", noExpiry, 300, []byte{0x02, 0xac, 0x02, 'v'}},
		{"expiry and schema", 0x0102030405060708, 2, []byte{0x03, 1, 2, 3, 4, 5, 6, 7, 8, 0x02, 'v'}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := appendValue(nil, []byte("v"), c.expiresAt, c.schema)
			if !bytes.Equal(got, c.want) {
				t.Fatalf("appendValue = %x, want %x", got, c.want)
			}
			exp, schema, n, err := readHeaderSchema(got)
			if err != nil || exp != c.expiresAt || schema != c.schema || n != len(got)-1 {
				t.Fatalf("readHeaderSchema = %d, %d, %d, %v", exp, schema, n, err)
			}
			payload, exp, n, err := readFrame(appendFrame(nil, []byte("v"), c.expiresAt, c.schema))
			if err != nil || string(payload) != "v" || exp != c.expiresAt || n != len(got)+1 {
				t.Fatalf("readFrame = %q, %d, %d, %v", payload, exp, n, err)
			}
		})
	}
}

// TestValueHeaderCorrupt: a damaged header is ErrCorrupt, never a panic or
// a wrong schema.
func TestValueHeaderCorrupt(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown flag", []byte{0x04, 'v'}},
		{"truncated expiry", []byte{0x03, 1, 2}},
		{"schema 0 flagged", []byte{0x02, 0x00, 'v'}},
		{"truncated schema", []byte{0x02, 0x80}},
		{"non-minimal schema", []byte{0x02, 0x81, 0x00}},
		{"schema over 32 bits", []byte{0x02, 0x80, 0x80, 0x80, 0x80, 0x10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, _, err := readHeaderSchema(c.b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("readHeaderSchema(%x) = %v, want ErrCorrupt", c.b, err)
			}
			if _, err := restorable(KindValue, c.b, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("restorable(%x) = %v, want ErrCorrupt", c.b, err)
			}
		})
	}
}

// TestRestoreFormat1: a manifest of format 1, what every checkpoint taken
// before schema versions says, is still restored.
func TestRestoreFormat1(t *testing.T) {
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			bs := blobKinds(t)[0].open(t)
			clock := newFakeClock()
			all := Range{0, testMaxP}
			src, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
			must(t, err)
			defer src.Close()
			must(t, src.ValuePut("count", []byte("k"), nil, []byte{5, 0, 0, 0, 0, 0, 0, 0}, 0))
			m := snapshotTo(t, src, bs)
			m.Format = 1
			dst, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
			must(t, err)
			defer dst.Close()
			restoreFromAll(t, dst, bs, m)
			v, schema, ok, err := dst.ValueGetSchema("count", []byte("k"), nil, nil)
			must(t, err)
			if !ok || v[0] != 5 || schema != 0 {
				t.Fatalf("restored %x, schema %d, %v", v, schema, ok)
			}
		})
	}
}

// FuzzValueHeader: any bytes decode to ErrCorrupt or to a header that
// re-encodes to the same bytes (one encoding per header).
func FuzzValueHeader(f *testing.F) {
	f.Add([]byte{0x00, 'v'})
	f.Add([]byte{0x03, 1, 2, 3, 4, 5, 6, 7, 8, 0x02, 'v'})
	f.Add([]byte{0x02, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		exp, schema, n, err := readHeaderSchema(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if n > len(b) {
			t.Fatalf("header of %d bytes in %d", n, len(b))
		}
		if b[0]&valExpiry != 0 && exp == noExpiry {
			return // format 1 decoded this too; no writer produces it
		}
		if again := appendHeader(nil, exp, schema); !bytes.Equal(again, b[:n]) {
			t.Fatalf("header %x re-encodes as %x", b[:n], again)
		}
	})
}
