//go:build !purego

package jsonscan

// plainPrefix16 returns n, the index of the first '"', '\\' or byte below
// 0x20 in b, or a multiple of 16 with fewer than 16 bytes left after it
// and none of them in b[:n]. It scans 16 bytes a step with SSE2, which
// every amd64 processor has (plain_amd64.s).
//
//go:noescape
func plainPrefix16(b []byte) int

// long is plainEnd after a first plain word: a string that long is likely
// longer still, and the SSE2 loop takes 16 bytes in about the time the
// word loop takes 8 (short strings, most keys, never get here: the call
// would cost more than it saves).
func long(b []byte, i int) int {
	if len(b)-i >= 16 {
		i += plainPrefix16(b[i:])
	}
	return words(b, i)
}
