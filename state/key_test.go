package state

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestEncodeKeyRoundTrip(t *testing.T) {
	scope := Scope{"default", "card-activity", "per_card"}
	tests := []struct {
		name string
		key  Key
	}{
		{"value", Key{Scope: scope, KeyGroup: 7, Kind: KindValue, Name: "count", Key: []byte("card-1")}},
		{"value with namespace", Key{Scope: scope, KeyGroup: 0, Kind: KindValue, Name: "sum", Key: []byte("k"), Namespace: []byte{0, 1, 2}}},
		{"list", Key{Scope: scope, KeyGroup: MaxKeyGroups - 1, Kind: KindList, Name: "buffer", Key: []byte("k")}},
		{"map", Key{Scope: scope, KeyGroup: 3, Kind: KindMap, Name: "seen", Key: []byte("k"), Namespace: []byte("w"), UserKey: []byte("merchant-9")}},
		{"map empty user key", Key{Scope: scope, KeyGroup: 3, Kind: KindMap, Name: "seen", Key: []byte("k")}},
		{"empty name and key", Key{Scope: scope, KeyGroup: 1, Kind: KindValue}},
		{"event timer", Key{Scope: scope, KeyGroup: 5, Kind: KindTimer, Timer: EventTime, Timestamp: 1_700_000_000_000, Key: []byte("k"), Namespace: []byte("w")}},
		{"negative timer", Key{Scope: scope, KeyGroup: 5, Kind: KindTimer, Timer: ProcessingTime, Timestamp: math.MinInt64, Key: []byte("k")}},
		{"long components", Key{Scope: Scope{string(bytes.Repeat([]byte("t"), 300)), "j", "o"}, KeyGroup: 2, Kind: KindValue, Name: string(bytes.Repeat([]byte("n"), 200)), Key: bytes.Repeat([]byte{0xff}, 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeKey(nil, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeKey(b)
			if err != nil {
				t.Fatal(err)
			}
			if !keysEqual(got, tt.key) {
				t.Fatalf("round trip: got %+v, want %+v", got, tt.key)
			}
		})
	}
}

func TestEncodeKeyRejects(t *testing.T) {
	scope := Scope{"t", "j", "o"}
	tests := []struct {
		name string
		key  Key
	}{
		{"empty tenant", Key{Scope: Scope{"", "j", "o"}, Kind: KindValue}},
		{"key group too large", Key{Scope: scope, KeyGroup: MaxKeyGroups, Kind: KindValue}},
		{"negative key group", Key{Scope: scope, KeyGroup: -1, Kind: KindValue}},
		{"unknown kind", Key{Scope: scope, Kind: 9}},
		{"value with user key", Key{Scope: scope, Kind: KindValue, UserKey: []byte("u")}},
		{"timer without kind", Key{Scope: scope, Kind: KindTimer}},
		{"timer with name", Key{Scope: scope, Kind: KindTimer, Timer: EventTime, Name: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := EncodeKey(nil, tt.key); !errors.Is(err, ErrInvalid) {
				t.Fatalf("EncodeKey(%+v) = %v, want ErrInvalid", tt.key, err)
			}
		})
	}
}

func TestDecodeKeyRejects(t *testing.T) {
	valid, err := EncodeKey(nil, Key{Scope: Scope{"t", "j", "o"}, KeyGroup: 1, Kind: KindValue, Name: "n", Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", valid[:len(valid)-1]},
		{"trailing byte", append(bytes.Clone(valid), 0)},
		{"non-minimal varint", append([]byte{0x81, 0x00, 't'}, valid[2:]...)},
		{"length past end", []byte{0x7f, 'a'}},
		{"empty scope part", append([]byte{0}, valid[2:]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if k, err := DecodeKey(tt.b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeKey(%x) = %+v, %v; want ErrCorrupt", tt.b, k, err)
			}
		})
	}
}

func keysEqual(a, b Key) bool {
	return a.Scope == b.Scope && a.KeyGroup == b.KeyGroup && a.Kind == b.Kind && a.Name == b.Name &&
		bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Namespace, b.Namespace) && bytes.Equal(a.UserKey, b.UserKey) &&
		a.Timer == b.Timer && a.Timestamp == b.Timestamp
}

// FuzzKeyRoundTrip encodes keys built from arbitrary parts: they decode to
// themselves, and within one operator every key of group g sorts before
// every key of group g+1, whatever the other components.
func FuzzKeyRoundTrip(f *testing.F) {
	f.Add("t", "j", "o", uint16(3), uint8(1), "name", []byte("key"), []byte("ns"), []byte("uk"), int64(5), []byte("key2"), uint8(3))
	f.Add("default", "job", "op", uint16(0), uint8(4), "", []byte{}, []byte{}, []byte{}, int64(-1), []byte{0xff, 0xff}, uint8(4))
	f.Add("a", "bc", "d", uint16(MaxKeyGroups-2), uint8(3), "\xff", []byte{0}, []byte{0xff}, []byte{0xff}, int64(math.MaxInt64), []byte{}, uint8(2))
	f.Fuzz(func(t *testing.T, tenant, job, op string, group uint16, kind uint8, name string, key, ns, userKey []byte, ts int64, otherKey []byte, otherKind uint8) {
		scope := Scope{tenant, job, op}
		if scope.Validate() != nil {
			return
		}
		g := int(group) % (MaxKeyGroups - 1)
		k := fuzzKey(scope, g, kind, name, key, ns, userKey, ts)
		b, err := EncodeKey(nil, k)
		if err != nil {
			t.Fatalf("EncodeKey(%+v): %v", k, err)
		}
		got, err := DecodeKey(b)
		if err != nil {
			t.Fatalf("DecodeKey(EncodeKey(%+v)): %v", k, err)
		}
		if !keysEqual(got, k) {
			t.Fatalf("round trip: got %+v, want %+v", got, k)
		}
		// Ordering: any key of the next group sorts after.
		next := fuzzKey(scope, g+1, otherKind, string(otherKey), otherKey, userKey, ns, ^ts)
		nb, err := EncodeKey(nil, next)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Compare(b, nb) >= 0 {
			t.Fatalf("key of group %d (%x) does not sort before key of group %d (%x)", g, b, g+1, nb)
		}
		// A scope's prefix never prefixes another scope's keys.
		other := Scope{tenant + job, "x", op}
		ob, err := EncodeKey(nil, fuzzKey(other, g, kind, name, key, ns, userKey, ts))
		if err != nil {
			t.Fatal(err)
		}
		if p := appendScope(nil, scope); bytes.HasPrefix(ob, p) {
			t.Fatalf("scope %s prefix %x prefixes a key of %s", scope, p, other)
		}
	})
}

func fuzzKey(scope Scope, g int, kind uint8, name string, key, ns, userKey []byte, ts int64) Key {
	k := Key{Scope: scope, KeyGroup: g, Key: key, Namespace: ns}
	switch kind % 4 {
	case 0:
		k.Kind, k.Name = KindValue, name
	case 1:
		k.Kind, k.Name = KindList, name
	case 2:
		k.Kind, k.Name, k.UserKey = KindMap, name, userKey
	case 3:
		k.Kind, k.Timer, k.Timestamp = KindTimer, TimerKind(1+kind/4%2), ts
	}
	return k
}

// FuzzDecodeKey feeds arbitrary bytes to the decoders of untrusted
// checkpoint data: they never panic, and what they accept is canonical.
func FuzzDecodeKey(f *testing.F) {
	for _, k := range []Key{
		{Scope: Scope{"t", "j", "o"}, KeyGroup: 1, Kind: KindValue, Name: "n", Key: []byte("k")},
		{Scope: Scope{"t", "j", "o"}, KeyGroup: 2, Kind: KindMap, Name: "m", Key: []byte("k"), UserKey: []byte("u")},
		{Scope: Scope{"t", "j", "o"}, KeyGroup: 3, Kind: KindTimer, Timer: EventTime, Timestamp: 9, Key: []byte("k")},
	} {
		b, _ := EncodeKey(nil, k)
		f.Add(b)
	}
	f.Add([]byte{0x80, 0x80, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeKey(b)
		if err == nil {
			again, err := EncodeKey(nil, k)
			if err != nil {
				t.Fatalf("decoded %+v does not encode: %v", k, err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("decode is not canonical: %x decodes to %+v which encodes to %x", b, k, again)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeKey error %v does not wrap ErrCorrupt", err)
		}
		// The snapshot-side decoders see the same bytes.
		_, _ = parseRelative(b)
		_, _ = restorable(KindList, b, 0)
		_, _ = restorable(KindValue, b, 0)
	})
}
