//go:build !purego

package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// TestPlainPrefix16 holds the SSE2 loop to its contract on random bytes:
// b[:n] has no special byte, and b[n] is one or fewer than 16 bytes are
// left after n, which is then a multiple of 16.
func TestPlainPrefix16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for range 20000 {
		b := make([]byte, r.IntN(100))
		for k := range b {
			b[k] = byte(0x20 + r.IntN(0xe0))
			if r.IntN(60) == 0 {
				b[k] = byte(r.IntN(0x20))
			}
		}
		n := plainPrefix16(b)
		for k := range n {
			if special(b[k]) {
				t.Fatalf("plainPrefix16(%q) = %d, past the special byte at %d", b, n, k)
			}
		}
		if n < len(b) && !special(b[n]) && (n%16 != 0 || len(b)-n >= 16) {
			t.Fatalf("plainPrefix16(%q) = %d: stopped at a plain byte with %d left", b, n, len(b)-n)
		}
		if n > len(b) {
			t.Fatalf("plainPrefix16(%q) = %d, past the end", b, n)
		}
	}
}
