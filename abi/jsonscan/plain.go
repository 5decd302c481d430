package jsonscan

import "math/bits"

// plainEnd returns the index of the first byte at or after i that ends or
// breaks a string ('"', '\\' or below 0x20), or len(b). Eight bytes at a
// time: the lowest byte special8 flags is always a special one (the false
// alarms it may raise are above a true one), so its index is exact.
// long is the loop for what follows a first plain word (plain_amd64.go,
// plain_other.go).
func plainEnd(b []byte, i int) int {
	if i+8 <= len(b) {
		if m := special8(load8(b[i : i+8])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		return long(b, i+8)
	}
	return tailEnd(b, i)
}

// words is plainEnd's word loop from i.
func words(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := special8(load8(b[i : i+8])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return tailEnd(b, i)
}

// tailEnd is plainEnd on the last bytes, fewer than 8, one at a time.
func tailEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}
