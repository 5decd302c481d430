// Package entryfile is the file format of a full state snapshot: a stream of
// key-value entries with a header and a trailing checksum, written and read
// in one pass so that a snapshot never has to fit in memory.
//
// It is not for choosing which entries go in (package state does), nor for
// naming or storing the file (content addressing happens around it).
//
// Layout:
//
//	magic     8 bytes "EDDYSNAP"
//	version   uvarint: the entry format version (state.FormatVersion)
//	entries   uvarint len(key) ≥ 1, key, uvarint len(value), value; repeated
//	end       uvarint 0 (keys are never empty)
//	count     8 bytes big-endian: the number of entries
//	checksum  4 bytes big-endian: CRC-32C of every byte before it
//
// The count and the end marker make a truncated file detectable even when
// the cut falls on an entry boundary; the checksum makes the file
// self-checking when it is copied somewhere its content address is not
// verified.
package entryfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// ErrFormat reports bytes that are not a valid entry file: truncated,
// damaged, or not an entry file at all.
var ErrFormat = errors.New("entryfile: invalid entry file")

// Magic starts every entry file.
const Magic = "EDDYSNAP"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer writes an entry file.
type Writer struct {
	w     *bufio.Writer
	crc   hash.Hash32
	count uint64
	tmp   [binary.MaxVarintLen64]byte
	err   error
}

// NewWriter starts an entry file on w with the given entry format version.
// The caller must call Close to complete the file.
func NewWriter(w io.Writer, version uint64) *Writer {
	crc := crc32.New(castagnoli)
	fw := &Writer{w: bufio.NewWriterSize(io.MultiWriter(w, crc), 256<<10), crc: crc}
	fw.write([]byte(Magic))
	fw.uvarint(version)
	return fw
}

func (w *Writer) write(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

func (w *Writer) uvarint(x uint64) {
	n := binary.PutUvarint(w.tmp[:], x)
	w.write(w.tmp[:n])
}

// Add appends one entry. The key must not be empty.
func (w *Writer) Add(key, val []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("entryfile: add: empty key")
	}
	w.uvarint(uint64(len(key)))
	w.write(key)
	w.uvarint(uint64(len(val)))
	w.write(val)
	w.count++
	return w.err
}

// Count is the number of entries added so far.
func (w *Writer) Count() uint64 { return w.count }

// Close writes the end marker and the trailer and flushes. It does not close
// the underlying writer.
func (w *Writer) Close() error {
	w.uvarint(0)
	var trailer [12]byte
	binary.BigEndian.PutUint64(trailer[:8], w.count)
	w.write(trailer[:8])
	if w.err == nil {
		w.err = w.w.Flush() // the checksum covers everything flushed so far
	}
	if w.err != nil {
		return w.err
	}
	binary.BigEndian.PutUint32(trailer[8:], w.crc.Sum32())
	w.write(trailer[8:])
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Reader reads an entry file.
type Reader struct {
	r       *bufio.Reader
	crc     hash.Hash32
	left    int64 // bytes not yet read, of the size given to NewReader
	version uint64
	count   uint64
	buf     []byte
	one     [1]byte
	done    bool
}

// NewReader reads the header of an entry file of exactly size bytes from r.
// Lengths in the file are checked against size, so a damaged length never
// makes the reader allocate more than the file holds.
func NewReader(r io.Reader, size int64) (*Reader, error) {
	fr := &Reader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(castagnoli), left: size}
	var magic [len(Magic)]byte
	if err := fr.full(magic[:]); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	if string(magic[:]) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q", ErrFormat, magic[:])
	}
	v, err := fr.uvarint()
	if err != nil {
		return nil, fmt.Errorf("%w: version: %w", ErrFormat, err)
	}
	fr.version = v
	return fr, nil
}

// Version is the entry format version the file was written with.
func (r *Reader) Version() uint64 { return r.version }

// Next returns the next entry, or ok == false after the last one, once the
// trailer has been checked. The slices are valid until the next call.
func (r *Reader) Next() (key, val []byte, ok bool, err error) {
	if r.done {
		return nil, nil, false, nil
	}
	kn, err := r.uvarint()
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: entry %d: key length: %w", ErrFormat, r.count+1, err)
	}
	if kn == 0 {
		return nil, nil, false, r.finish()
	}
	if kn > uint64(r.left) {
		return nil, nil, false, fmt.Errorf("%w: entry %d: key of %d bytes exceeds the %d left", ErrFormat, r.count+1, kn, r.left)
	}
	// Read the key into the buffer before the value length: the value
	// length check then counts the key as read.
	r.buf = grow(r.buf, int(kn))
	if err := r.full(r.buf[:kn]); err != nil {
		return nil, nil, false, fmt.Errorf("%w: entry %d: key: %w", ErrFormat, r.count+1, err)
	}
	vn, err := r.uvarint()
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: entry %d: value length: %w", ErrFormat, r.count+1, err)
	}
	if vn > uint64(r.left) {
		return nil, nil, false, fmt.Errorf("%w: entry %d: value of %d bytes exceeds the %d left", ErrFormat, r.count+1, vn, r.left)
	}
	r.buf = grow(r.buf, int(kn+vn))
	if err := r.full(r.buf[kn : kn+vn]); err != nil {
		return nil, nil, false, fmt.Errorf("%w: entry %d: value: %w", ErrFormat, r.count+1, err)
	}
	r.count++
	return r.buf[:kn:kn], r.buf[kn : kn+vn : kn+vn], true, nil
}

// finish checks the trailer after the end marker.
func (r *Reader) finish() error {
	var count [8]byte
	if err := r.full(count[:]); err != nil {
		return fmt.Errorf("%w: trailer: %w", ErrFormat, err)
	}
	if n := binary.BigEndian.Uint64(count[:]); n != r.count {
		return fmt.Errorf("%w: trailer counts %d entries, file has %d", ErrFormat, n, r.count)
	}
	want := r.crc.Sum32() // of everything read so far, which excludes the checksum
	var sum [4]byte
	if err := r.full(sum[:]); err != nil { // also hashes sum; want is already taken
		return fmt.Errorf("%w: checksum: %w", ErrFormat, err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return fmt.Errorf("%w: checksum %08x, content sums to %08x", ErrFormat, got, want)
	}
	if r.left != 0 {
		return fmt.Errorf("%w: %d bytes after the trailer", ErrFormat, r.left)
	}
	r.done = true
	return nil
}

// full reads exactly len(b) bytes and adds them to the checksum. (The
// checksum is fed what was consumed, not what the buffered reader pulled
// from the source, which runs ahead.)
func (r *Reader) full(b []byte) error {
	if int64(len(b)) > r.left {
		return io.ErrUnexpectedEOF
	}
	n, err := io.ReadFull(r.r, b)
	r.left -= int64(n)
	r.crc.Write(b[:n])
	return err
}

func (r *Reader) uvarint() (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if r.left <= 0 {
			return 0, io.ErrUnexpectedEOF
		}
		c, err := r.r.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		r.left--
		r.one[0] = c
		r.crc.Write(r.one[:])
		if c < 0x80 {
			if i > 0 && c == 0 {
				return 0, errors.New("non-minimal varint")
			}
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, errors.New("varint overflows 64 bits")
			}
			return x | uint64(c)<<s, nil
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, errors.New("varint too long")
}

func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}
