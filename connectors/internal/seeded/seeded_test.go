package seeded

import (
	"math"
	"testing"
)

func TestClamped(t *testing.T) {
	tests := []struct {
		name    string
		a, b, c uint64
		want    int64
	}{
		{"small", 7, 3, 2, 10},
		{"no intermediate overflow", math.MaxUint64 / 2, 4, 8, math.MaxUint64 / 4},
		{"clamped", math.MaxUint64, math.MaxUint64, 1, math.MaxInt64},
		{"quotient above MaxInt64", math.MaxUint64, 1, 1, math.MaxInt64},
	}
	for _, tc := range tests {
		if got := MulDivClamped(tc.a, tc.b, tc.c); got != tc.want {
			t.Errorf("%s: MulDivClamped(%d, %d, %d) = %d, want %d", tc.name, tc.a, tc.b, tc.c, got, tc.want)
		}
	}
	if got := AddClamped(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Errorf("AddClamped near the top = %d, want MaxInt64", got)
	}
	if got := AddClamped(10, -3); got != 7 {
		t.Errorf("AddClamped(10, -3) = %d", got)
	}
}

// TestStreams: At depends on (seed, n) only, and Intn stays in range.
func TestStreams(t *testing.T) {
	a, b := At(1, 5), At(1, 5)
	for range 100 {
		if a.Next() != b.Next() {
			t.Fatal("two streams of one (seed, n) differ")
		}
	}
	c, d := At(1, 5), At(1, 6)
	if c.Next() == d.Next() {
		t.Fatal("neighbouring record numbers share a stream")
	}
	r := New(3)
	var seen [7]bool
	for range 1000 {
		v := r.Intn(7)
		if v >= 7 {
			t.Fatalf("Intn(7) = %d", v)
		}
		seen[v] = true
		if f := r.Float(); f < 0 || f >= 1 {
			t.Fatalf("Float() = %v", f)
		}
	}
	for v, ok := range seen {
		if !ok {
			t.Fatalf("Intn(7) never gave %d in 1000 draws", v)
		}
	}
}
