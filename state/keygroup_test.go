package state

import (
	"fmt"
	"strconv"
	"testing"
)

func TestKeyGroupGolden(t *testing.T) {
	// The hash is part of the checkpoint format and of routing between
	// tasks: these values must never change.
	tests := []struct {
		key  string
		maxP int
		want int
	}{
		{"", 128, golden[0]},
		{"a", 128, golden[1]},
		{"card-42", 128, golden[2]},
		{"card-43", 128, golden[3]},
		{"card-42", 32768, golden[4]},
		{"user\x00\xff", 7, golden[5]},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.key, tt.maxP), func(t *testing.T) {
			if got := KeyGroup([]byte(tt.key), tt.maxP); got != tt.want {
				t.Errorf("KeyGroup(%q, %d) = %d, want %d", tt.key, tt.maxP, got, tt.want)
			}
		})
	}
}

var golden = [...]int{38, 91, 4, 125, 12804, 1}

func TestKeyGroupSpread(t *testing.T) {
	// Keys that differ only in high bits of a byte must still spread: plain
	// FNV-1a mod a power of two would put them all in one group.
	const maxP = 128
	counts := make([]int, maxP)
	for i := range 1 << 12 {
		key := make([]byte, 12)
		for j := range key {
			if i&(1<<j) != 0 {
				key[j] = 0x80
			}
		}
		counts[KeyGroup(key, maxP)]++
	}
	var distinct int
	for _, c := range counts {
		if c > 0 {
			distinct++
		}
	}
	if distinct < maxP {
		t.Errorf("high-bit keys reach %d of %d groups", distinct, maxP)
	}
	counts = make([]int, maxP)
	const n = 128 * 1000
	for i := range n {
		counts[KeyGroup([]byte("key-"+strconv.Itoa(i)), maxP)]++
	}
	for g, c := range counts {
		if c < n/maxP*8/10 || c > n/maxP*12/10 {
			t.Errorf("group %d has %d keys, want about %d", g, c, n/maxP)
		}
	}
}

func TestKeyGroupRangeAssignment(t *testing.T) {
	tests := []struct {
		name        string
		parallelism int
		maxP        int
	}{
		{"one subtask", 1, 128},
		{"two", 2, 128},
		{"three", 3, 128},
		{"seven of 128", 7, 128},
		{"equal", 128, 128},
		{"uneven small", 3, 10},
		{"one group each", 10, 10},
		{"max", 1000, MaxKeyGroups},
		{"prime", 13, 97},
	}
	for p := 1; p <= 40; p++ {
		for _, maxP := range []int{p, p + 1, 2 * p, 3*p + 1, 128} {
			if maxP >= p {
				tests = append(tests, struct {
					name        string
					parallelism int
					maxP        int
				}{fmt.Sprintf("p=%d/maxP=%d", p, maxP), p, maxP})
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owner := make([]int, tt.maxP)
			for g := range owner {
				owner[g] = -1
			}
			next := 0
			for i := range tt.parallelism {
				r := KeyGroupRange(i, tt.parallelism, tt.maxP)
				if r.Start != next {
					t.Fatalf("subtask %d range %s does not start where the previous ended (%d)", i, r, next)
				}
				if r.Len() < 1 {
					t.Fatalf("subtask %d has empty range %s", i, r)
				}
				// Flink's inclusive end.
				if wantEnd := ((i+1)*tt.maxP - 1) / tt.parallelism; r.End-1 != wantEnd {
					t.Fatalf("subtask %d range %s, Flink's inclusive end is %d", i, r, wantEnd)
				}
				for g := r.Start; g < r.End; g++ {
					if owner[g] != -1 {
						t.Fatalf("group %d owned by %d and %d", g, owner[g], i)
					}
					owner[g] = i
				}
				next = r.End
			}
			if next != tt.maxP {
				t.Fatalf("ranges end at %d, want %d", next, tt.maxP)
			}
			for g, o := range owner {
				if got := SubtaskFor(g, tt.parallelism, tt.maxP); got != o {
					t.Fatalf("SubtaskFor(%d) = %d, KeyGroupRange gives %d", g, got, o)
				}
			}
		})
	}
}

func TestValidateParallelism(t *testing.T) {
	tests := []struct {
		name    string
		p, maxP int
		ok      bool
	}{
		{"default", 4, 128, true},
		{"p equals maxP", 128, 128, true},
		{"p above maxP", 129, 128, false},
		{"zero p", 0, 128, false},
		{"zero maxP", 1, 0, false},
		{"maxP too large", 1, MaxKeyGroups + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateParallelism(tt.p, tt.maxP); (err == nil) != tt.ok {
				t.Errorf("ValidateParallelism(%d, %d) = %v", tt.p, tt.maxP, err)
			}
		})
	}
}
