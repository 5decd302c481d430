package host

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// wasmPageSize is the unit in which Wasm memory grows.
const wasmPageSize = 1 << 16

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
