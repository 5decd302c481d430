package state

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Scope names the operator a Store belongs to. Tenant and job keep tenants
// and jobs apart in the shared database; Operator is the stable uid from the
// job spec, which is what lets state survive module swaps and rescaling.
type Scope struct {
	Tenant   string `json:"tenant"`
	Job      string `json:"job"`
	Operator string `json:"operator"`
}

// Validate checks that every component is set: an empty one would make it
// easy to share state by accident (two jobs without a name).
func (s Scope) Validate() error {
	if s.Tenant == "" || s.Job == "" || s.Operator == "" {
		return fmt.Errorf("%w: scope %s: tenant, job and operator must all be set", ErrInvalid, s)
	}
	return nil
}

func (s Scope) String() string { return s.Tenant + "/" + s.Job + "/" + s.Operator }

// Kind is the kind of an entry in the keyspace.
type Kind uint8

// Entry kinds; their values are part of the key encoding and the snapshot
// format.
const (
	KindValue Kind = 1
	KindList  Kind = 2
	KindMap   Kind = 3
	KindTimer Kind = 4
)

func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindTimer:
		return "timer"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// TimerKind says which clock a timer is set on. Its values are part of the
// key encoding.
type TimerKind uint8

// Timer kinds, as in Flink.
const (
	EventTime      TimerKind = 1
	ProcessingTime TimerKind = 2
)

func (k TimerKind) valid() bool { return k == EventTime || k == ProcessingTime }

func (k TimerKind) String() string {
	switch k {
	case EventTime:
		return "event-time"
	case ProcessingTime:
		return "processing-time"
	}
	return fmt.Sprintf("timer-kind(%d)", uint8(k))
}

// Key is the decoded form of one entry's address.
type Key struct {
	Scope     Scope
	KeyGroup  int
	Kind      Kind
	Name      string    // state name; empty for timers
	Key       []byte    // record key
	Namespace []byte    // e.g. an encoded window; empty when unused
	UserKey   []byte    // map entries only
	Timer     TimerKind // timers only
	Timestamp int64     // timers only
}

// EncodeKey appends the encoding of k to dst. The layout, with lp(x) a
// minimal uvarint length followed by the bytes of x:
//
//	lp(tenant) lp(job) lp(operator)   scope prefix
//	keygroup                          2 bytes, big-endian
//	kind                              1 byte
//	value, list: lp(name) lp(key) lp(namespace)
//	map:         lp(name) lp(key) lp(namespace) userkey (the rest, unprefixed)
//	timer:       timerkind(1) timestamp(8, big-endian, sign bit flipped) lp(key) lp(namespace)
//
// Why this shape:
//   - length prefixes make every component boundary unambiguous, and no
//     scope's prefix is a prefix of another's, so tenants, jobs and operators
//     never see each other's entries;
//   - the key group right after the scope makes all of one operator's
//     entries in a key-group range (state and timers) one contiguous span,
//     which is what snapshots, restores and rescaling copy;
//   - a map's user key comes last and unprefixed, so one map is the span of
//     keys that start with its prefix and iterates in user-key byte order;
//   - a list is one entry whose value is the concatenation of its elements,
//     so an append is a blind write (a Pebble merge), not a read and a write;
//   - timers sort by kind then timestamp within a key group, so the earliest
//     timer of a group is one seek away; PopTimers merges the groups of a
//     range with a heap of their heads, as Flink's
//     KeyGroupPartitionedPriorityQueue does.
func EncodeKey(dst []byte, k Key) ([]byte, error) {
	if err := k.Scope.Validate(); err != nil {
		return dst, err
	}
	if k.KeyGroup < 0 || k.KeyGroup >= MaxKeyGroups {
		return dst, fmt.Errorf("%w: key group %d outside [0, %d)", ErrInvalid, k.KeyGroup, MaxKeyGroups)
	}
	dst = appendScope(dst, k.Scope)
	switch k.Kind {
	case KindValue, KindList:
		if len(k.UserKey) != 0 {
			return dst, fmt.Errorf("%w: %s key with a user key", ErrInvalid, k.Kind)
		}
		return appendStateKey(dst, nil, k.KeyGroup, k.Kind, k.Name, k.Key, k.Namespace), nil
	case KindMap:
		dst = appendStateKey(dst, nil, k.KeyGroup, k.Kind, k.Name, k.Key, k.Namespace)
		return append(dst, k.UserKey...), nil
	case KindTimer:
		if !k.Timer.valid() {
			return dst, fmt.Errorf("%w: %s", ErrInvalid, k.Timer)
		}
		if k.Name != "" || len(k.UserKey) != 0 {
			return dst, fmt.Errorf("%w: timer key with a state name or user key", ErrInvalid)
		}
		return appendTimerKey(dst, nil, k.KeyGroup, k.Timer, k.Timestamp, k.Key, k.Namespace), nil
	}
	return dst, fmt.Errorf("%w: %s", ErrInvalid, k.Kind)
}

// DecodeKey parses a key produced by EncodeKey. Byte slices in the result
// alias b. It accepts only the canonical encoding, so a decoded key encodes
// back to exactly b; anything else is an error wrapping ErrCorrupt.
func DecodeKey(b []byte) (Key, error) {
	var k Key
	var err error
	var tenant, job, op []byte
	rest := b
	if tenant, rest, err = readLP(rest); err != nil {
		return k, fmt.Errorf("%w: tenant: %w", ErrCorrupt, err)
	}
	if job, rest, err = readLP(rest); err != nil {
		return k, fmt.Errorf("%w: job: %w", ErrCorrupt, err)
	}
	if op, rest, err = readLP(rest); err != nil {
		return k, fmt.Errorf("%w: operator: %w", ErrCorrupt, err)
	}
	k.Scope = Scope{Tenant: string(tenant), Job: string(job), Operator: string(op)}
	if err := k.Scope.Validate(); err != nil {
		return k, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	rk, err := parseRelative(rest)
	if err != nil {
		return k, err
	}
	k.KeyGroup, k.Kind, k.Key, k.Namespace, k.UserKey = rk.group, rk.kind, rk.key, rk.ns, rk.userKey
	k.Name = string(rk.name)
	k.Timer, k.Timestamp = rk.timer, rk.ts
	return k, nil
}

// relKey is a parsed scope-relative key (what snapshots contain).
type relKey struct {
	group   int
	kind    Kind
	name    []byte
	key, ns []byte
	userKey []byte
	timer   TimerKind
	ts      int64
}

// parseRelative parses a key with the scope prefix removed. Errors wrap
// ErrCorrupt.
func parseRelative(b []byte) (relKey, error) {
	var rk relKey
	if len(b) < 3 {
		return rk, fmt.Errorf("%w: key of %d bytes is too short", ErrCorrupt, len(b))
	}
	rk.group = int(binary.BigEndian.Uint16(b))
	if rk.group >= MaxKeyGroups {
		return rk, fmt.Errorf("%w: key group %d outside [0, %d)", ErrCorrupt, rk.group, MaxKeyGroups)
	}
	rk.kind = Kind(b[2])
	rest := b[3:]
	var err error
	switch rk.kind {
	case KindValue, KindList, KindMap:
		if rk.name, rest, err = readLP(rest); err != nil {
			return rk, fmt.Errorf("%w: state name: %w", ErrCorrupt, err)
		}
	case KindTimer:
		if len(rest) < 9 {
			return rk, fmt.Errorf("%w: timer key too short", ErrCorrupt)
		}
		rk.timer = TimerKind(rest[0])
		if !rk.timer.valid() {
			return rk, fmt.Errorf("%w: %s", ErrCorrupt, rk.timer)
		}
		rk.ts = decodeTimestamp(rest[1:9])
		rest = rest[9:]
	default:
		return rk, fmt.Errorf("%w: %s", ErrCorrupt, rk.kind)
	}
	if rk.key, rest, err = readLP(rest); err != nil {
		return rk, fmt.Errorf("%w: key: %w", ErrCorrupt, err)
	}
	if rk.ns, rest, err = readLP(rest); err != nil {
		return rk, fmt.Errorf("%w: namespace: %w", ErrCorrupt, err)
	}
	if rk.kind == KindMap {
		rk.userKey = rest
	} else if len(rest) != 0 {
		return rk, fmt.Errorf("%w: %d trailing bytes after a %s key", ErrCorrupt, len(rest), rk.kind)
	}
	return rk, nil
}

func appendScope(dst []byte, s Scope) []byte {
	dst = appendLPString(dst, s.Tenant)
	dst = appendLPString(dst, s.Job)
	return appendLPString(dst, s.Operator)
}

func appendGroup(dst []byte, group int) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(group))
}

// appendStateKey appends prefix, group, kind, lp(name), lp(key), lp(ns): a
// value or list key, or the prefix shared by all entries of one map.
func appendStateKey(dst, prefix []byte, group int, kind Kind, name string, key, ns []byte) []byte {
	dst = append(dst, prefix...)
	dst = appendGroup(dst, group)
	dst = append(dst, byte(kind))
	dst = appendLPString(dst, name)
	dst = appendLP(dst, key)
	return appendLP(dst, ns)
}

// appendTimerSpan appends the prefix shared by all timers of one kind in
// one key group.
func appendTimerSpan(dst, prefix []byte, group int, kind TimerKind) []byte {
	dst = append(dst, prefix...)
	dst = appendGroup(dst, group)
	return append(dst, byte(KindTimer), byte(kind))
}

func appendTimerKey(dst, prefix []byte, group int, kind TimerKind, ts int64, key, ns []byte) []byte {
	dst = appendTimerSpan(dst, prefix, group, kind)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts)^(1<<63))
	dst = appendLP(dst, key)
	return appendLP(dst, ns)
}

func decodeTimestamp(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

func appendLP(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendLPString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readLP reads a length-prefixed component. It rejects non-minimal
// uvarints, so that every key has exactly one encoding.
func readLP(b []byte) (field, rest []byte, err error) {
	n, w, err := readUvarint(b)
	if err != nil {
		return nil, b, err
	}
	b = b[w:]
	if n > uint64(len(b)) {
		return nil, b, fmt.Errorf("length %d exceeds the %d bytes left", n, len(b))
	}
	return b[:n:n], b[n:], nil
}

func readUvarint(b []byte) (uint64, int, error) {
	var x uint64
	var s uint
	for i := 0; i < len(b) && i < binary.MaxVarintLen64; i++ {
		c := b[i]
		if c < 0x80 {
			if i > 0 && c == 0 {
				return 0, 0, fmt.Errorf("non-minimal varint")
			}
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, 0, fmt.Errorf("varint overflows 64 bits")
			}
			return x | uint64(c)<<s, i + 1, nil
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0, fmt.Errorf("truncated varint")
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix (appended to dst), or nil if there is none (all bytes 0xff).
func prefixEnd(dst, prefix []byte) []byte {
	dst = append(dst, prefix...)
	for i := len(dst) - 1; i >= 0; i-- {
		if dst[i] != 0xff {
			dst[i]++
			return dst[:i+1]
		}
	}
	return nil
}

// Values. Each value and map entry is a header byte, an optional expiry,
// an optional schema version and the payload; a list value is a sequence of
// such frames, each with a uvarint payload length after the header. The
// expiry is absolute (Unix milliseconds of the TTL clock) so that it
// survives a snapshot and restore: state restored after its TTL reads as
// absent, as in Flink.
//
// The header byte is a set of flags. valExpiry: an 8-byte big-endian
// expiry follows. valSchema (FormatVersion 2): a uvarint schema version,
// 1 to 2^32-1, follows the expiry. Schema 0, what every value of format 1
// has, is written without the flag, so such values are byte for byte what
// format 1 wrote and format 1 is read by the same code.
const (
	valPlain  byte = 0x00
	valExpiry byte = 0x01
	valSchema byte = 0x02
	// valFlags are the flags this version knows; any other bit is corrupt.
	valFlags = valExpiry | valSchema
	// noExpiry marks an entry without TTL.
	noExpiry int64 = 0
)

func appendValue(dst, val []byte, expiresAt int64, schema uint32) []byte {
	dst = appendHeader(dst, expiresAt, schema)
	return append(dst, val...)
}

func appendFrame(dst, val []byte, expiresAt int64, schema uint32) []byte {
	dst = appendHeader(dst, expiresAt, schema)
	dst = binary.AppendUvarint(dst, uint64(len(val)))
	return append(dst, val...)
}

func appendHeader(dst []byte, expiresAt int64, schema uint32) []byte {
	if expiresAt == noExpiry && schema == 0 {
		return append(dst, valPlain)
	}
	flags := valPlain
	if expiresAt != noExpiry {
		flags |= valExpiry
	}
	if schema != 0 {
		flags |= valSchema
	}
	dst = append(dst, flags)
	if expiresAt != noExpiry {
		dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	}
	if schema != 0 {
		dst = binary.AppendUvarint(dst, uint64(schema))
	}
	return dst
}

// readHeader returns the expiry and the header length.
func readHeader(b []byte) (expiresAt int64, n int, err error) {
	expiresAt, _, n, err = readHeaderSchema(b)
	return expiresAt, n, err
}

// readHeaderSchema returns the expiry, the schema version and the header
// length.
func readHeaderSchema(b []byte) (expiresAt int64, schema uint32, n int, err error) {
	if len(b) == 0 {
		return 0, 0, 0, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	flags := b[0]
	if flags == valPlain { // the common case, kept as cheap as format 1's
		return noExpiry, 0, 1, nil
	}
	if flags&^valFlags != 0 {
		return 0, 0, 0, fmt.Errorf("%w: unknown value header 0x%02x", ErrCorrupt, flags)
	}
	expiresAt, n = noExpiry, 1
	if flags&valExpiry != 0 {
		if len(b) < 9 {
			return 0, 0, 0, fmt.Errorf("%w: truncated expiry", ErrCorrupt)
		}
		expiresAt, n = int64(binary.BigEndian.Uint64(b[1:9])), 9
	}
	if flags&valSchema != 0 {
		v, w, err := readUvarint(b[n:])
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%w: schema version: %w", ErrCorrupt, err)
		}
		if v == 0 || v > math.MaxUint32 {
			return 0, 0, 0, fmt.Errorf("%w: schema version %d outside [1, 2^32)", ErrCorrupt, v)
		}
		schema, n = uint32(v), n+w
	}
	return expiresAt, schema, n, nil
}

// readFrame reads one list element: its payload, expiry and total length.
func readFrame(b []byte) (payload []byte, expiresAt int64, n int, err error) {
	expiresAt, h, err := readHeader(b)
	if err != nil {
		return nil, 0, 0, err
	}
	size, w, err := readUvarint(b[h:])
	if err != nil {
		return nil, 0, 0, fmt.Errorf("%w: list element length: %w", ErrCorrupt, err)
	}
	start := h + w
	if size > uint64(len(b)-start) {
		return nil, 0, 0, fmt.Errorf("%w: list element of %d bytes exceeds the %d left", ErrCorrupt, size, len(b)-start)
	}
	end := start + int(size)
	return b[start:end:end], expiresAt, end, nil
}

// expiry converts a TTL into an absolute expiry in Unix milliseconds,
// rounding up so a positive TTL never expires immediately.
func expiry(nowMs int64, ttl time.Duration) int64 {
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	if nowMs > math.MaxInt64-ms {
		return math.MaxInt64
	}
	if nowMs+ms == noExpiry {
		return noExpiry + 1 // only reachable with a clock at 1970; keep "no TTL" distinct
	}
	return nowMs + ms
}
