package host

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

// wasmPageSize is the unit in which Wasm memory grows.
const wasmPageSize = 1 << 16

// The largest limits Validate accepts: beyond them one task alone could
// take a worker's memory, which is what the limits are for.
const (
	maxEmitBytes  = 1 << 30
	maxTableLimit = 1 << 24
)

// Config configures an Engine. The zero value of every field means its
// default, so Config{CacheDir: dir} is valid; DefaultConfig spells the
// defaults out.
type Config struct {
	// CacheDir is the directory of wazero's compilation cache, so a restarted
	// process does not compile the same module again. "" keeps compiled code
	// in memory only.
	CacheDir string
	// MemoryLimit caps the linear memory of each instance in bytes, rounded
	// down to whole 64 KiB pages. Default 64 MiB; at most 4 GiB.
	MemoryLimit uint64
	// MaxEmitBytes bounds what one guest call (one batch handed to
	// eddy_process, one batch of timers, one eddy_close, one eddy_agg_*
	// call) may emit, in encoded bytes (abi.RecordSize: the 32-byte entry,
	// key, value and headers of each record). Default 16 MiB: 64 times the
	// largest default batch of 256 records of 1 KiB, and a quarter of the
	// default MemoryLimit, so that what the host and its caller copy out of
	// one call stays of the order of the instance's own memory. A call that
	// emits more fails with ErrEmitLimit before the host decodes or hands
	// on the batch that crosses the bound. At most 1 GiB.
	MaxEmitBytes uint64
	// MaxEmitRecords bounds the records one guest call may emit, as
	// MaxEmitBytes bounds their bytes; it is what limits a flood of empty
	// records, each of which costs the host an abi.Record (some 80 bytes)
	// whatever its size. Default 262,144: a fan-out of 4 from the largest
	// batch a job may configure (65,536), 1,024 from the default one. At
	// most abi.MaxRecords.
	MaxEmitRecords uint64
	// TableLimit caps the elements of the tables an instance defines, in
	// all: declared minimums above it are refused at Compile, and each
	// table's maximum is lowered so that table.grow fails (returns -1, as
	// the Wasm spec lets it) beyond it. An element costs the host 8 bytes.
	// Default 1,048,576 (8 MiB); at most 16,777,216.
	TableLimit uint64
	// CallTimeout is the deadline of each guest call (one per batch).
	// Default 5s.
	CallTimeout time.Duration
	// LogLinesPerSecond limits the guest log, stdout and stderr lines logged
	// per instance. Default 50. Lines over the limit are dropped and counted;
	// the count is logged once when logging resumes.
	LogLinesPerSecond float64
	// LogBurst is how many lines an instance may log at once before the rate
	// applies. Default 200.
	LogBurst int
	// Logger receives engine events and, unless an instance has its own,
	// guest output. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the configuration used for zero fields.
func DefaultConfig() Config {
	return Config{
		MemoryLimit:       64 << 20,
		MaxEmitBytes:      16 << 20,
		MaxEmitRecords:    1 << 18,
		TableLimit:        1 << 20,
		CallTimeout:       5 * time.Second,
		LogLinesPerSecond: 50,
		LogBurst:          200,
		Logger:            slog.Default(),
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MemoryLimit == 0 {
		c.MemoryLimit = d.MemoryLimit
	}
	if c.MaxEmitBytes == 0 {
		c.MaxEmitBytes = d.MaxEmitBytes
	}
	if c.MaxEmitRecords == 0 {
		c.MaxEmitRecords = d.MaxEmitRecords
	}
	if c.TableLimit == 0 {
		c.TableLimit = d.TableLimit
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = d.CallTimeout
	}
	if c.LogLinesPerSecond == 0 {
		c.LogLinesPerSecond = d.LogLinesPerSecond
	}
	if c.LogBurst == 0 {
		c.LogBurst = d.LogBurst
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate reports every field that is out of range, zero fields counting
// as their defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var problems []string
	if c.MemoryLimit < wasmPageSize || c.MemoryLimit > 1<<32 {
		problems = append(problems, fmt.Sprintf("MemoryLimit %d is outside [64 KiB, 4 GiB]", c.MemoryLimit))
	}
	if c.MaxEmitBytes > maxEmitBytes {
		problems = append(problems, fmt.Sprintf("MaxEmitBytes %d is over the most of 1 GiB", c.MaxEmitBytes))
	}
	if c.MaxEmitRecords > abi.MaxRecords {
		problems = append(problems, fmt.Sprintf("MaxEmitRecords %d is over the most of %d", c.MaxEmitRecords, abi.MaxRecords))
	}
	if c.TableLimit > maxTableLimit {
		problems = append(problems, fmt.Sprintf("TableLimit %d is over the most of %d elements", c.TableLimit, maxTableLimit))
	}
	if c.CallTimeout < 0 {
		problems = append(problems, fmt.Sprintf("CallTimeout %s is negative", c.CallTimeout))
	}
	if c.LogLinesPerSecond < 0 || math.IsNaN(c.LogLinesPerSecond) || math.IsInf(c.LogLinesPerSecond, 0) {
		problems = append(problems, fmt.Sprintf("LogLinesPerSecond %v is not a positive number", c.LogLinesPerSecond))
	}
	if c.LogBurst < 0 {
		problems = append(problems, fmt.Sprintf("LogBurst %d is negative", c.LogBurst))
	}
	if len(problems) == 0 {
		return nil
	}
	// One line, as every error of this package: a user reads it in a job status.
	return fmt.Errorf("host: invalid config: %s", strings.Join(problems, "; "))
}

// memoryLimitPages is MemoryLimit in whole pages; the limit is a maximum,
// so a partial page is not granted.
func (c Config) memoryLimitPages() uint32 {
	return uint32(c.MemoryLimit / wasmPageSize)
}
