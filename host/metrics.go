package host

// Metrics of guest calls. Each instance counts its own calls in atomics
// (written by the task's goroutine, read by a scrape), so a call pays a
// clock read, a bucket search and a few uncontended atomic adds; the
// Prometheus side reads them only when scraped (Engine.Collector). The
// counts of released instances are folded into the engine's totals, so a
// counter never goes back when a task ends or restarts.

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricLabels place an instance's series: the task running it.
type MetricLabels struct {
	Tenant, Job, Node string
	Subtask           int
}

// callBuckets are the upper bounds, in seconds, of the call duration
// histogram: a batch call takes microseconds, a runaway one up to the
// deadline (seconds).
var callBuckets = [...]float64{1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1, 5}

// exportStats counts the calls of one export of one instance.
type exportStats struct {
	export              string
	calls, traps, dline atomic.Uint64
	sumNanos            atomic.Uint64
	buckets             [len(callBuckets) + 1]atomic.Uint64 // one per callBuckets bound, then +Inf
}

func (s *exportStats) observe(d time.Duration) {
	s.calls.Add(1)
	s.sumNanos.Add(uint64(d))
	secs := d.Seconds()
	i := 0
	for i < len(callBuckets) && secs > callBuckets[i] {
		i++
	}
	s.buckets[i].Add(1)
}

// fold adds o's counts to s.
func (s *exportStats) fold(o *exportStats) {
	s.calls.Add(o.calls.Load())
	s.traps.Add(o.traps.Load())
	s.dline.Add(o.dline.Load())
	s.sumNanos.Add(o.sumNanos.Load())
	for i := range s.buckets {
		s.buckets[i].Add(o.buckets[i].Load())
	}
}

// instanceStats are one instance's metrics.
type instanceStats struct {
	labels MetricLabels
	module string
	// exports is replaced (copy on write) when an export is first called,
	// so that the call path reads it without a lock.
	exports atomic.Pointer[[]*exportStats]
	memory  atomic.Uint64 // bytes, after the last call
}

// forExport returns the counters of export, made on its first call.
func (s *instanceStats) forExport(export string) *exportStats {
	cur := s.exports.Load()
	if cur != nil {
		for _, e := range *cur {
			if e.export == export {
				return e
			}
		}
	}
	e := &exportStats{export: export}
	var next []*exportStats
	if cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, e)
	s.exports.Store(&next)
	return e
}

// retiredKey names the folded counts of released instances.
type retiredKey struct {
	labels         MetricLabels
	module, export string
}

// engineMetrics holds every live instance's stats and the totals of the
// released ones.
type engineMetrics struct {
	mu      sync.Mutex
	live    map[*instanceStats]struct{}
	retired map[retiredKey]*exportStats
}

func (m *engineMetrics) add(s *instanceStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live == nil {
		m.live = map[*instanceStats]struct{}{}
	}
	m.live[s] = struct{}{}
}

// retire folds a released instance into the totals.
func (m *engineMetrics) retire(s *instanceStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[s]; !ok {
		return
	}
	delete(m.live, s)
	if m.retired == nil {
		m.retired = map[retiredKey]*exportStats{}
	}
	if cur := s.exports.Load(); cur != nil {
		for _, e := range *cur {
			k := retiredKey{labels: s.labels, module: s.module, export: e.export}
			t := m.retired[k]
			if t == nil {
				t = &exportStats{export: e.export}
				m.retired[k] = t
			}
			t.fold(e)
		}
	}
}

var (
	instanceLabelNames = []string{"tenant", "job", "node", "subtask", "module"}
	exportLabelNames   = append(append([]string(nil), instanceLabelNames...), "export")

	descCalls = prometheus.NewDesc("eddy_wasm_calls_total",
		"Guest calls, by export.", exportLabelNames, nil)
	descDuration = prometheus.NewDesc("eddy_wasm_call_duration_seconds",
		"Duration of guest calls, by export.", exportLabelNames, nil)
	descTraps = prometheus.NewDesc("eddy_wasm_traps_total",
		"Guest calls that ended in a trap (a deadline, memory limit, bad pointer or exit included).", exportLabelNames, nil)
	descDeadlines = prometheus.NewDesc("eddy_wasm_deadline_exceeded_total",
		"Guest calls interrupted at their deadline.", exportLabelNames, nil)
	descMemory = prometheus.NewDesc("eddy_wasm_instance_memory_bytes",
		"Linear memory of a live instance, after its last call.", instanceLabelNames, nil)
)

// Collector returns the collector of the engine's guest-call metrics, for
// a process's registry.
func (e *Engine) Collector() prometheus.Collector { return (*engineCollector)(e) }

type engineCollector Engine

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCalls, descDuration, descTraps, descDeadlines, descMemory} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	m := &c.metrics
	// Sum live and retired counts per series, under the lock so that an
	// instance retiring meanwhile is counted once.
	m.mu.Lock()
	totals := make(map[retiredKey]*exportStats, len(m.retired))
	for k, t := range m.retired {
		sum := &exportStats{export: k.export}
		sum.fold(t)
		totals[k] = sum
	}
	type mem struct {
		labels MetricLabels
		module string
		bytes  uint64
	}
	var mems []mem
	for s := range m.live {
		mems = append(mems, mem{s.labels, s.module, s.memory.Load()})
		cur := s.exports.Load()
		if cur == nil {
			continue
		}
		for _, e := range *cur {
			k := retiredKey{labels: s.labels, module: s.module, export: e.export}
			sum := totals[k]
			if sum == nil {
				sum = &exportStats{export: e.export}
				totals[k] = sum
			}
			sum.fold(e)
		}
	}
	m.mu.Unlock()
	for k, t := range totals {
		lv := []string{k.labels.Tenant, k.labels.Job, k.labels.Node, strconv.Itoa(k.labels.Subtask), k.module, k.export}
		ch <- prometheus.MustNewConstMetric(descCalls, prometheus.CounterValue, float64(t.calls.Load()), lv...)
		ch <- prometheus.MustNewConstMetric(descTraps, prometheus.CounterValue, float64(t.traps.Load()), lv...)
		ch <- prometheus.MustNewConstMetric(descDeadlines, prometheus.CounterValue, float64(t.dline.Load()), lv...)
		buckets := make(map[float64]uint64, len(callBuckets))
		var cum uint64
		for i, ub := range callBuckets {
			cum += t.buckets[i].Load()
			buckets[ub] = cum
		}
		cum += t.buckets[len(callBuckets)].Load()
		ch <- prometheus.MustNewConstHistogram(descDuration, cum, time.Duration(t.sumNanos.Load()).Seconds(), buckets, lv...)
	}
	for _, s := range mems {
		ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(s.bytes),
			s.labels.Tenant, s.labels.Job, s.labels.Node, strconv.Itoa(s.labels.Subtask), s.module)
	}
}
