package host

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func pU(v uint32) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
func pSec(id byte, parts ...[]byte) []byte {
	var c []byte
	for _, p := range parts {
		c = append(c, p...)
	}
	return append(append([]byte{id}, pU(uint32(len(c)))...), c...)
}
func pMod(secs ...[]byte) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	for _, s := range secs {
		out = append(out, s...)
	}
	return out
}
func cat(parts ...[]byte) []byte {
	var c []byte
	for _, p := range parts {
		c = append(c, p...)
	}
	return c
}

const max32 = 0xffffffff

var b = func(x ...byte) []byte { return x }

// validOp returns a valid operator module with extra sections spliced in by id.
func validOp(extra map[byte][]byte) []byte {
	base := wasmModule{funcs: abiFuncs(), exportMemory: true}.bytes()
	// split base into sections
	var secs [][]byte
	var ids []byte
	p := 8
	for p < len(base) {
		id := base[p]
		size := int(base[p+1]) // all small
		secs = append(secs, base[p:p+2+size])
		ids = append(ids, id)
		p += 2 + size
	}
	order := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13, 0: 14}
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	used := map[byte]bool{}
	for i, s := range secs {
		for _, eid := range []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11, 0} {
			if e, ok := extra[eid]; ok && !used[eid] && order[eid] < order[ids[i]] {
				out = append(out, e...)
				used[eid] = true
			}
		}
		out = append(out, s...)
	}
	for _, eid := range []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11, 0} {
		if e, ok := extra[eid]; ok && !used[eid] {
			out = append(out, e...)
			used[eid] = true
		}
	}
	return out
}

var probeCases = map[string]func() []byte{
	"funcs":          func() []byte { return pMod(pSec(3, pU(max32))) },
	"types_count":    func() []byte { return pMod(pSec(1, pU(max32))) },
	"type_params":    func() []byte { return pMod(pSec(1, b(1, 0x60), pU(max32))) },
	"type_results":   func() []byte { return pMod(pSec(1, b(1, 0x60, 0), pU(max32))) },
	"imports":        func() []byte { return pMod(pSec(2, pU(max32))) },
	"import_name":    func() []byte { return pMod(pSec(2, b(1), pU(max32))) },
	"tables":         func() []byte { return pMod(pSec(4, pU(max32))) },
	"globals":        func() []byte { return pMod(pSec(6, pU(max32))) },
	"exports":        func() []byte { return pMod(pSec(7, pU(max32))) },
	"export_name":    func() []byte { return pMod(pSec(7, b(1), pU(max32))) },
	"elems":          func() []byte { return pMod(pSec(9, pU(max32))) },
	"elem_funcs":     func() []byte { return pMod(pSec(9, b(1, 0, 0x41, 0, 0x0b), pU(max32))) },
	"elem_exprs":     func() []byte { return pMod(pSec(9, b(1, 5, 0x70), pU(max32))) },
	"codes":          func() []byte { return pMod(pSec(10, pU(max32))) },
	"code_size":      func() []byte { return pMod(pSec(10, b(1), pU(max32), b(0))) },
	"locals":         func() []byte { return pMod(pSec(10, b(1, 7, 1), pU(max32), b(0x7f, 0x0b))) },
	"locals_2groups": func() []byte { return pMod(pSec(10, b(1, 12, 2), pU(1<<31), b(0x7f), pU(1<<31-1), b(0x7f, 0x0b))) },
	"datas":          func() []byte { return pMod(pSec(11, pU(max32))) },
	"data_bytes":     func() []byte { return pMod(pSec(11, b(1, 1), pU(max32))) },
	"datacount":      func() []byte { return pMod(pSec(12, pU(max32))) },
	"tags":           func() []byte { return pMod(pSec(13, pU(max32))) },
	"custom_size":    func() []byte { return cat(pMod(), b(0), pU(max32), b(1, 'x')) },
	"name_funcs":     func() []byte { return pMod(pSec(0, b(4), []byte("name"), b(1, 5), pU(max32))) },
	"name_locals":    func() []byte { return pMod(pSec(0, b(4), []byte("name"), b(2, 5), pU(max32))) },
	"name_locals_inner": func() []byte {
		return pMod(pSec(0, b(4), []byte("name"), b(2, 7, 1, 0), pU(max32)))
	},
	"name_module": func() []byte { return pMod(pSec(0, b(4), []byte("name"), b(0, 5), pU(max32))) },
	"table_min_1": func() []byte {
		return validOp(map[byte][]byte{4: pSec(4, b(1, 0x70, 0), pU(1<<27))})
	},
	"table_min_8": func() []byte {
		var t []byte
		for range 8 {
			t = append(t, 0x70, 0)
			t = append(t, pU(1<<27)...)
		}
		return validOp(map[byte][]byte{4: pSec(4, b(8), t)})
	},
	"table_init_8": func() []byte { // 0x40 0x00 reftype limits expr: filled with ref.func 0
		var t []byte
		for range 8 {
			t = append(t, 0x40, 0, 0x70, 0)
			t = append(t, pU(1<<27)...)
			t = append(t, 0xd2, 0, 0x0b)
		}
		return validOp(map[byte][]byte{4: pSec(4, b(8), t)})
	},
	"valid": func() []byte { return validOp(nil) },
}

func TestProbe(t *testing.T) {
	name := os.Getenv("PROBE")
	if name == "" {
		t.Skip()
	}
	wasm := probeCases[name]()
	e := newTestEngine(t, Config{})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	start := time.Now()
	m, err := e.Compile(context.Background(), name, wasm)
	took := time.Since(start)
	close(done)
	runtime.ReadMemStats(&after)
	if m != nil {
		m.Close(context.Background())
	}
	fmt.Printf("RESULT %s len=%d took=%s totalAlloc=%dMiB heapSysDelta=%dMiB peakHeapSampled=%dMiB err=%v\n", name, len(wasm), took.Round(time.Millisecond),
		(after.TotalAlloc-before.TotalAlloc)>>20, (after.HeapSys-before.HeapSys)>>20, peak.Load()>>20, err)
}

func TestProbeList(t *testing.T) {
	if os.Getenv("PROBELIST") == "" {
		t.Skip()
	}
	for k := range probeCases {
		fmt.Println("CASE", k)
	}
}
