package host

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// tableBomb is an operator whose eddy_process grows its one table (no
// maximum declared) by 65,536 elements at a time until table.grow fails,
// then traps, as a guest that cannot get its table would. Unbounded, it
// took 3.6 GB before its deadline.
func tableBomb() []byte {
	funcs := smallAllocFuncs()
	funcs[3].body = []byte{
		0x03, 0x40, // loop
		0xd0, 0x70, // ref.null func
		0x41, 0x80, 0x80, 0x04, // i32.const 65536
		0xfc, 0x0f, 0x00, // table.grow 0
		0x41, 0x7f, // i32.const -1
		0x47,       // i32.ne
		0x0d, 0x00, // br_if 0
		0x0b, // end
		0x00, // unreachable
	}
	// One funcref table, minimum 0, no maximum.
	return wasmModule{funcs: funcs, exportMemory: true, tables: []byte{1, 0x70, 0, 0}}.bytes()
}

// memoryBomb is an operator whose eddy_process grows its memory a page
// at a time and fills each new page, until memory.grow fails at the
// limit; then it traps. (grow_bomb only grows: pages never written cost a
// mapping nothing, so this one makes them count.)
func memoryBomb() []byte {
	funcs := smallAllocFuncs()
	funcs[3].locals = 1 // local 2: the page memory.grow returned
	funcs[3].body = []byte{
		0x02, 0x40, // block
		0x03, 0x40, // loop
		0x41, 0x01, 0x40, 0x00, // i32.const 1; memory.grow
		0x22, 0x02, // local.tee 2
		0x41, 0x7f, 0x46, // i32.const -1; i32.eq
		0x0d, 0x01, // br_if 1
		0x20, 0x02, 0x41, 0x10, 0x74, // local.get 2; i32.const 16; i32.shl
		0x41, 0x01, 0x41, 0x80, 0x80, 0x04, // i32.const 1; i32.const 65536
		0xfc, 0x0b, 0x00, // memory.fill: the whole page
		0x0c, 0x00, // br 0
		0x0b, 0x0b, // end; end
		0x00, // unreachable
	}
	return wasmModule{funcs: funcs, exportMemory: true}.bytes()
}

// smallAllocFuncs are abiFuncs with an eddy_alloc that gives address 8
// for up to 65,528 bytes and 0 beyond, which fits the one page of memory
// the hand-built modules start with.
func smallAllocFuncs() []wasmFunc {
	funcs := abiFuncs()
	funcs[1].body = []byte{0x20, 0x00, 0x41, 0xf8, 0xff, 0x03, 0x4b, 0x04, 0x7f, 0x41, 0x00, 0x05, 0x41, 0x08, 0x0b}
	return funcs
}

// footprint runs f and reports what it cost the process: the bytes the Go
// heap allocated meanwhile (TotalAlloc counts every byte, freed or not, so
// it bounds the heap's peak) and the growth of the peak resident set
// (VmHWM after resetting it; -1 where /proc cannot say).
func footprint(t *testing.T, f func() error) (heap uint64, resident int64, err error) {
	t.Helper()
	base := int64(-1)
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil { // 5: reset the peak to the current RSS
		base = procStatus(t, "VmHWM:")
	}
	heap, err = allocated(f)
	resident = -1
	if base >= 0 {
		resident = procStatus(t, "VmHWM:") - base
	}
	return heap, resident, err
}

// procStatus reads a size in bytes from /proc/self/status, -1 if absent.
func procStatus(t *testing.T, field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/self/status %s %q: %v", field, rest, err)
			}
			return kb << 10
		}
	}
	return -1
}

// TestHostileModulesAreContained: each hostile module fails its own call
// with one line naming the limit it hit, the host's memory stays within
// the stated bound (doc.go: MemoryLimit + MaxEmitBytes + 80 bytes per
// emitted record + 8 bytes per table element, plus slack for what the
// test itself keeps), and the engine goes on running other modules.
func TestHostileModulesAreContained(t *testing.T) {
	if testing.Short() {
		t.Skip("runs each bomb to its limit")
	}
	cfg := DefaultConfig()
	cfg.Logger = nil
	const slack = 32 << 20
	for _, tc := range []struct {
		name  string
		load  func(*testing.T, *Engine) *Module
		err   error
		words []string
		// bound on the Go heap allocated and on the resident set's growth
		heap, resident uint64
	}{
		{name: "emit loop, large batches", load: fixture("emit_flood"), err: ErrEmitLimit,
			words: []string{"operator job/bomb[0]: eddy_process emitted more than 16 MiB in one call (limit max_emit_bytes=16777216; this eddy.emit of 1048608 bytes brought it to 16777728)"},
			heap:  cfg.MaxEmitBytes + slack, resident: cfg.MaxEmitBytes + 2*slack},
		{name: "emit loop, tiny records", load: fixture("emit_tiny_flood"), err: ErrEmitLimit,
			words: []string{"operator job/bomb[0]: eddy_process emitted more than 262144 records in one call (limit max_emit_records=262144; this eddy.emit of 1 brought it to 262145)"},
			// The host allocates nothing per record; the collector's slice
			// of 80-byte records, grown by append, allocates some 5 times
			// its final 20 MiB on the way.
			heap: 6*80*cfg.MaxEmitRecords + slack, resident: cfg.MaxEmitRecords*(80+32) + 2*slack},
		{name: "table.grow bomb", load: compiled(tableBomb()), err: ErrTrap,
			words: []string{"operator job/bomb[0]: eddy_process trapped: ", "unreachable", "(its tables may grow to 1048576 elements in all, limit table_limit=1048576)"},
			// wazero grows a table by append: the 8 MiB it may reach cost
			// some 40 MiB of allocations, most of them garbage at once.
			heap: 6 * 8 * cfg.TableLimit, resident: 3*8*cfg.TableLimit + slack},
		{name: "memory.grow bomb", load: fixture("grow_bomb"), err: ErrMemoryLimit,
			words: []string{"operator job/bomb[0]: eddy_process: memory limit of 64 MiB reached"},
			heap:  slack / 2, resident: slack},
		{name: "memory.grow bomb writing every page", load: compiled(memoryBomb()), err: ErrMemoryLimit,
			words: []string{"operator job/bomb[0]: eddy_process: memory limit of 64 MiB reached (", "unreachable"},
			heap:  slack / 2, resident: cfg.MemoryLimit + slack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t, Config{})
			i := newTestInstance(t, tc.load(t, e), "job/bomb[0]")
			if err := i.Open(nil); err != nil {
				t.Fatal(err)
			}
			var c collector // copies every record, as a task does
			in := []abi.Record{{Value: []byte("go")}}
			heap, resident, err := footprint(t, func() error { return i.Process(in, c.emit) })
			t.Logf("Go heap allocated %.1f MiB, peak resident set grew %.1f MiB, %d records copied",
				float64(heap)/(1<<20), float64(resident)/(1<<20), len(c.recs))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Process = %v, want an error wrapping %v", err, tc.err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !containsAll(msg, tc.words...) {
				t.Errorf("error = %q, want one line containing %q", msg, tc.words)
			}
			if heap > tc.heap {
				t.Errorf("the Go heap allocated %d MiB, want at most %d MiB", heap>>20, tc.heap>>20)
			}
			if resident > int64(tc.resident) {
				t.Errorf("the peak resident set grew by %d MiB, want at most %d MiB", resident>>20, tc.resident>>20)
			}
			if err := i.Process(in, c.emit); err == nil || err.Error() != i.err.Error() {
				t.Errorf("second Process = %v, want the sticky error", err)
			}
			checkEchoWorks(t, e)
		})
	}
}

func fixture(name string) func(*testing.T, *Engine) *Module {
	return func(t *testing.T, e *Engine) *Module { return loadFixture(t, e, name) }
}

func compiled(wasm []byte) func(*testing.T, *Engine) *Module {
	return func(t *testing.T, e *Engine) *Module {
		m, err := e.Compile(context.Background(), "bomb.wasm", wasm)
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		return m
	}
}

// TestEmitLimitsAreConfigurable: the limits count per call, so a module
// that emits up to them in each of several calls keeps running, and a
// lower limit stops the same module sooner.
func TestEmitLimitsAreConfigurable(t *testing.T) {
	e := newTestEngine(t, Config{MaxEmitRecords: 3, MaxEmitBytes: 1 << 10})
	i := newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	three := []abi.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	for range 3 {
		if err := i.Process(three, nil); err != nil {
			t.Fatalf("Process of 3 records with MaxEmitRecords 3: %v", err)
		}
	}
	err := i.Process(append(three, abi.Record{Value: []byte("d")}), nil)
	if !errors.Is(err, ErrEmitLimit) || !strings.Contains(err.Error(), "limit max_emit_records=3; this eddy.emit of 4 brought it to 4") {
		t.Fatalf("Process of 4 records = %v, want the max_emit_records line", err)
	}

	e = newTestEngine(t, Config{MaxEmitBytes: 100})
	i = newTestInstance(t, loadFixture(t, e, "echo"), "job/echo[0]")
	if err := i.Open(nil); err != nil {
		t.Fatal(err)
	}
	err = i.Process([]abi.Record{{Value: make([]byte, 69)}}, nil) // 32 + 69 bytes
	if !errors.Is(err, ErrEmitLimit) || !strings.Contains(err.Error(), "emitted more than 100 bytes in one call (limit max_emit_bytes=100; this eddy.emit of 101 bytes brought it to 101)") {
		t.Fatalf("Process of a 101-byte record = %v, want the max_emit_bytes line", err)
	}
}

func TestConfigValidateLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid
	}{
		{name: "defaults", cfg: Config{}},
		{name: "largest", cfg: Config{MaxEmitBytes: 1 << 30, MaxEmitRecords: abi.MaxRecords, TableLimit: 1 << 24}},
		{name: "emit bytes", cfg: Config{MaxEmitBytes: 1<<30 + 1}, want: "MaxEmitBytes 1073741825 is over the most of 1 GiB"},
		{name: "emit records", cfg: Config{MaxEmitRecords: abi.MaxRecords + 1}, want: "MaxEmitRecords 16777217 is over the most of 16777216"},
		{name: "tables", cfg: Config{TableLimit: 1<<24 + 1}, want: "TableLimit 16777217 is over the most of 16777216 elements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the hand-assembled fixtures under testdata/")

// TestHandAssembledFixtures: testdata/table_bomb.wasm and memory_bomb.wasm,
// which tests of other packages run as jobs, are tableBomb and memoryBomb
// (their source, above); go test -run TestHandAssembledFixtures -update
// rewrites them.
func TestHandAssembledFixtures(t *testing.T) {
	for name, wasm := range map[string][]byte{"table_bomb": tableBomb(), "memory_bomb": memoryBomb()} {
		path := "testdata/" + name + ".wasm"
		if *update {
			if err := os.WriteFile(path, wasm, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wasm) {
			t.Errorf("%s is not what %s() assembles: run go test -run TestHandAssembledFixtures -update ./host/", path, name)
		}
	}
}
