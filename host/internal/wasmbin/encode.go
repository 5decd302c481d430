package wasmbin

// AppendU32 appends v in the shortest unsigned LEB128 encoding.
func AppendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendS32 appends v in the shortest signed LEB128 encoding.
func AppendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendName appends s as a name: its length, then its bytes.
func AppendName(b []byte, s string) []byte {
	return append(AppendU32(b, uint32(len(s))), s...)
}

// AppendSection appends a section: id, the size of content, and content.
func AppendSection(b []byte, id byte, content []byte) []byte {
	b = AppendU32(append(b, id), uint32(len(content)))
	return append(b, content...)
}
