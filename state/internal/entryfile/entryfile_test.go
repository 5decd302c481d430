package entryfile

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type entry struct{ k, v string }

func encode(t testing.TB, version uint64, ents []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, version)
	for _, e := range ents {
		if err := w.Add([]byte(e.k), []byte(e.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decode(b []byte) (uint64, []entry, error) {
	r, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return 0, nil, err
	}
	var out []entry
	for {
		k, v, ok, err := r.Next()
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			return r.Version(), out, nil
		}
		out = append(out, entry{string(k), string(v)})
	}
}

func TestRoundTrip(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	cases := []struct {
		name string
		ents []entry
	}{
		{"empty", nil},
		{"one", []entry{{"k", "v"}}},
		{"empty value", []entry{{"k", ""}}},
		{"many", func() []entry {
			var es []entry
			for i := range 10_000 {
				es = append(es, entry{fmt.Sprintf("key-%05d", i), strings.Repeat("v", i%300)})
			}
			return es
		}()},
		{"larger than the buffer", []entry{{"a", big}, {big, "b"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := encode(t, 7, tc.ents)
			v, got, err := decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if v != 7 {
				t.Errorf("version %d, want 7", v)
			}
			if len(got) != len(tc.ents) {
				t.Fatalf("%d entries, want %d", len(got), len(tc.ents))
			}
			for i := range got {
				if got[i] != tc.ents[i] {
					t.Fatalf("entry %d differs", i)
				}
			}
		})
	}
}

func TestRejectsDamage(t *testing.T) {
	b := encode(t, 1, []entry{{"alpha", "one"}, {"beta", "two"}, {"gamma", ""}})
	for n := range len(b) {
		if _, _, err := decode(b[:n]); !errors.Is(err, ErrFormat) {
			t.Errorf("truncated to %d of %d bytes: %v, want ErrFormat", n, len(b), err)
		}
	}
	for i := range len(b) {
		for _, bit := range []byte{0x01, 0x80} {
			d := bytes.Clone(b)
			d[i] ^= bit
			if _, _, err := decode(d); !errors.Is(err, ErrFormat) {
				t.Errorf("bit %#x of byte %d flipped: %v, want ErrFormat", bit, i, err)
			}
		}
	}
	if _, _, err := decode(append(bytes.Clone(b), 0)); !errors.Is(err, ErrFormat) {
		t.Errorf("trailing byte: %v, want ErrFormat", err)
	}
}

func TestWriterRejectsEmptyKey(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, 1)
	if err := w.Add(nil, []byte("v")); err == nil {
		t.Fatal("empty key accepted")
	}
}

// FuzzReader: any input is either rejected with ErrFormat or decodes to
// entries that encode back to exactly the input.
func FuzzReader(f *testing.F) {
	f.Add(encode(f, 1, nil))
	f.Add(encode(f, 1, []entry{{"k", "v"}, {"key2", strings.Repeat("z", 300)}}))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ents, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not match ErrFormat", err)
			}
			return
		}
		if again := encode(t, v, ents); !bytes.Equal(again, b) {
			t.Fatalf("decoded input does not encode back to itself")
		}
	})
}
