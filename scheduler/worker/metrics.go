package worker

// The worker's Prometheus metrics and readiness. The task families read
// the live counters of the running deployments at scrape time (const
// metrics), so a record costs nothing more than the counters the tasks
// keep anyway.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/proto/rpc"
)

var (
	taskLabels = []string{"tenant", "job", "node", "subtask", "worker"}

	descRecordsIn     = taskDesc("eddy_task_records_in_total", "Records the task read from its inputs (a source task: that its source produced).")
	descRecordsOut    = taskDesc("eddy_task_records_out_total", "Records the task wrote to its outputs, once per edge, and handed to its sink.")
	descBytesIn       = taskDesc("eddy_task_bytes_in_total", "Key and value bytes of the records counted by eddy_task_records_in_total.")
	descBytesOut      = taskDesc("eddy_task_bytes_out_total", "Key and value bytes of the records counted by eddy_task_records_out_total.")
	descBusy          = taskDesc("eddy_task_busy_seconds_total", "Time the task was neither idle nor backpressured (rate()*1000: Flink's busyTimeMsPerSecond).")
	descIdle          = taskDesc("eddy_task_idle_seconds_total", "Time the task waited for input (rate()*1000: Flink's idleTimeMsPerSecond).")
	descBackpressured = taskDesc("eddy_task_backpressured_seconds_total", "Time the task waited for room downstream (rate()*1000: Flink's backPressuredTimeMsPerSecond).")
	descInputWM       = taskDesc("eddy_task_input_watermark_milliseconds", "Minimum watermark of the task's active inputs, ms since the epoch (absent before the first).")
	descOutputWM      = taskDesc("eddy_task_output_watermark_milliseconds", "Watermark the task emits, ms since the epoch (absent before the first).")
	descLate          = taskDesc("eddy_task_late_records_dropped_total", "Records the task's windows dropped as late (no late_output).")
	descPending       = taskDesc("eddy_task_source_pending_records", "Records waiting for the task's source (Kafka: end offsets minus positions); absent when the source cannot tell.")
	descRegistered    = prometheus.NewDesc("eddy_worker_registered", "1 while the worker is registered with the leader and its heartbeats are answered.", []string{"worker"}, nil)
	descSlots         = prometheus.NewDesc("eddy_worker_slots", "Task slots of the worker.", []string{"worker"}, nil)
)

func taskDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, taskLabels, nil)
}

// Collector returns the collector of the worker's task metrics.
func (w *Worker) Collector() prometheus.Collector { return (*collector)(w) }

type collector Worker

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecordsIn, descRecordsOut, descBytesIn, descBytesOut, descBusy, descIdle,
		descBackpressured, descInputWM, descOutputWM, descLate, descPending, descRegistered, descSlots} {
		ch <- d
	}
}

// liveTask is one task's stats with the labels of its deployment.
type liveTask struct {
	tenant, job string
	stat        dataflow.TaskStat
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	w := (*Worker)(c)
	id := w.cfg.ID
	ready := 0.0
	if w.Ready() == nil {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(descRegistered, prometheus.GaugeValue, ready, id)
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(w.cfg.Slots), id)
	for _, t := range w.liveTasks() {
		s := t.stat
		lv := []string{t.tenant, t.job, s.Node, strconv.Itoa(s.Subtask), id}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		counter(descRecordsIn, float64(s.RecordsIn))
		counter(descRecordsOut, float64(s.RecordsOut))
		counter(descBytesIn, float64(s.BytesIn))
		counter(descBytesOut, float64(s.BytesOut))
		counter(descBusy, s.Busy.Seconds())
		counter(descIdle, s.Idle.Seconds())
		counter(descBackpressured, s.Backpressured.Seconds())
		counter(descLate, float64(s.LateDropped))
		if known(s.InputWatermark) {
			gauge(descInputWM, float64(s.InputWatermark))
		}
		if known(s.Watermark) {
			gauge(descOutputWM, float64(s.Watermark))
		}
		if s.PendingRecords >= 0 {
			gauge(descPending, float64(s.PendingRecords))
		}
	}
}

// known: a watermark that is neither "none yet" nor the end of input.
func known(wm int64) bool { return wm != math.MinInt64 && wm != math.MaxInt64 }

// liveTasks lists the tasks of the deployments this worker runs: of each
// job, only its latest attempt's (an older one may be ending), so that a
// series names one task.
func (w *Worker) liveTasks() []liveTask {
	w.mu.Lock()
	latest := map[string]*running{}
	attempts := map[string]uint32{}
	for key, r := range w.jobs {
		if a, ok := attempts[key.job]; !ok || key.attempt > a {
			latest[key.job], attempts[key.job] = r, key.attempt
		}
	}
	type dep struct {
		tenant, job string
		j           *dataflow.Job
	}
	var deps []dep
	for job, r := range latest {
		if r.job != nil {
			deps = append(deps, dep{rpc.Tenant(r.d.GetTenant()), job, r.job})
		}
	}
	w.mu.Unlock()
	var out []liveTask
	for _, d := range deps {
		for _, s := range d.j.TaskStats() {
			out = append(out, liveTask{tenant: d.tenant, job: d.job, stat: s})
		}
	}
	return out
}

// Ready says whether the worker is registered with the leader and its
// heartbeats are answered: nil, or why not.
func (w *Worker) Ready() error {
	if !w.registered.Load() {
		return errors.New("not registered with the coordinator leader")
	}
	last, timeout := w.lastHeartbeat.Load(), time.Duration(w.heartbeatTimeout.Load())
	if since := time.Since(time.Unix(0, last)); timeout > 0 && since > timeout {
		return fmt.Errorf("no heartbeat answered for %s (timeout %s)", since.Round(time.Millisecond), timeout)
	}
	return nil
}
