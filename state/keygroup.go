package state

import "fmt"

// DefaultMaxParallelism is the number of key groups of a job that does not
// set max_parallelism, as in DESIGN.md.
const DefaultMaxParallelism = 128

// MaxKeyGroups bounds max_parallelism. It is Flink's bound (2^15); the key
// encoding stores a key group in 2 bytes, so anything up to 65536 would fit.
const MaxKeyGroups = 1 << 15

// KeyGroup returns the key group of a record key: hash(key) mod
// maxParallelism. The hash is part of the checkpoint format and of the
// routing contract between tasks, so it must never change: 64-bit FNV-1a over
// the key bytes followed by the MurmurHash3 fmix64 finalizer. The finalizer
// is needed because FNV-1a's low bits depend only on the low bits of each
// input byte, and mod a power of two keeps only low bits.
//
// maxParallelism must be in [1, MaxKeyGroups]; KeyGroup panics otherwise, as
// it is validated once per job, not per record.
func KeyGroup(key []byte, maxParallelism int) int {
	if maxParallelism <= 0 || maxParallelism > MaxKeyGroups {
		panic(fmt.Sprintf("state: KeyGroup: max parallelism %d outside [1, %d]", maxParallelism, MaxKeyGroups))
	}
	return int(hashKey(key) % uint64(maxParallelism))
}

func hashKey(key []byte) uint64 {
	const (
		fnvOffset = 14695981039346656037
		fnvPrime  = 1099511628211
	)
	h := uint64(fnvOffset)
	for _, c := range key {
		h ^= uint64(c)
		h *= fnvPrime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Range is a half-open range of key groups [Start, End).
type Range struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Contains reports whether key group g is in r.
func (r Range) Contains(g int) bool { return g >= r.Start && g < r.End }

// Len is the number of key groups in r.
func (r Range) Len() int { return r.End - r.Start }

func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// ValidateParallelism checks that parallelism and maxParallelism can be
// used with KeyGroupRange and SubtaskFor: 1 ≤ parallelism ≤ maxParallelism ≤
// MaxKeyGroups. Every subtask then owns at least one key group.
func ValidateParallelism(parallelism, maxParallelism int) error {
	if maxParallelism < 1 || maxParallelism > MaxKeyGroups {
		return fmt.Errorf("%w: max parallelism %d outside [1, %d]", ErrInvalid, maxParallelism, MaxKeyGroups)
	}
	if parallelism < 1 || parallelism > maxParallelism {
		return fmt.Errorf("%w: parallelism %d outside [1, max parallelism %d]", ErrInvalid, parallelism, maxParallelism)
	}
	return nil
}

// KeyGroupRange returns the key groups owned by subtask (0-based) of an
// operator with the given parallelism, exactly as Flink's
// KeyGroupRangeAssignment does: subtask i owns
// [ceil(i*maxP/p), ceil((i+1)*maxP/p)), which is Flink's inclusive end
// ((i+1)*maxP-1)/p plus one. It panics on arguments ValidateParallelism
// rejects or a subtask outside [0, parallelism).
func KeyGroupRange(subtask, parallelism, maxParallelism int) Range {
	mustParallelism(parallelism, maxParallelism)
	if subtask < 0 || subtask >= parallelism {
		panic(fmt.Sprintf("state: KeyGroupRange: subtask %d outside [0, %d)", subtask, parallelism))
	}
	return Range{
		Start: (subtask*maxParallelism + parallelism - 1) / parallelism,
		End:   ((subtask+1)*maxParallelism + parallelism - 1) / parallelism,
	}
}

// SubtaskFor returns the subtask whose KeyGroupRange contains keyGroup:
// keyGroup*parallelism/maxParallelism, as Flink computes it. It panics on
// arguments ValidateParallelism rejects or a key group outside
// [0, maxParallelism).
func SubtaskFor(keyGroup, parallelism, maxParallelism int) int {
	mustParallelism(parallelism, maxParallelism)
	if keyGroup < 0 || keyGroup >= maxParallelism {
		panic(fmt.Sprintf("state: SubtaskFor: key group %d outside [0, %d)", keyGroup, maxParallelism))
	}
	return keyGroup * parallelism / maxParallelism
}

func mustParallelism(parallelism, maxParallelism int) {
	if err := ValidateParallelism(parallelism, maxParallelism); err != nil {
		panic(err.Error())
	}
}
