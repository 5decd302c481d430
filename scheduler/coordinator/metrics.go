package coordinator

// The coordinator's Prometheus metrics, readiness and the authorization
// of a scrape. Job series come from the FSM at scrape time (restarts and
// the last checkpoint from the replicated state; the checkpoint and swap
// counters from what this member applied, fsm.JobCounters) and only the
// leader exports them, so that a cluster's series are not counted once
// per member; every member exports its Raft series.

import (
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/internal/metricsrv"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

var (
	jobLabels = []string{"tenant", "job", "name"}

	descCheckpointsCompleted = prometheus.NewDesc("eddy_job_checkpoints_completed_total", "Checkpoints and savepoints of the job that completed.", jobLabels, nil)
	descCheckpointsFailed    = prometheus.NewDesc("eddy_job_checkpoints_failed_total", "Checkpoints and savepoints of the job that failed.", jobLabels, nil)
	descLastDuration         = prometheus.NewDesc("eddy_job_last_checkpoint_duration_seconds", "Duration of the job's latest completed checkpoint or savepoint.", jobLabels, nil)
	descLastSize             = prometheus.NewDesc("eddy_job_last_checkpoint_size_bytes", "State bytes the job's latest completed checkpoint references (full size).", jobLabels, nil)
	descLastIncremental      = prometheus.NewDesc("eddy_job_last_checkpoint_incremental_size_bytes", "Bytes uploaded for the job's latest completed checkpoint.", jobLabels, nil)
	descRestarts             = prometheus.NewDesc("eddy_job_restarts_total", "Restarts of the job (RUNNING to RESTARTING).", jobLabels, nil)
	descSwaps                = prometheus.NewDesc("eddy_job_swaps_total", "Hot swaps of the job by the state each reached: swapped, refused, failed, rolled_back.", append(append([]string(nil), jobLabels...), "outcome"), nil)
	descJobRunning           = prometheus.NewDesc("eddy_job_running", "1 while the job is RUNNING, 0 while it waits for slots or restarts.", jobLabels, nil)

	// The tasks as the workers last reported them with their heartbeats:
	// what a tenant sees of its tasks through the coordinator (a worker's
	// own, finer eddy_task_* series are on its cluster-internal port).
	reportLabels       = append(append([]string(nil), jobLabels...), "task", "worker")
	descReportIn       = prometheus.NewDesc("eddy_job_task_records_in_total", "Records a task of the job's current attempt read, as its worker last reported.", reportLabels, nil)
	descReportOut      = prometheus.NewDesc("eddy_job_task_records_out_total", "Records a task of the job's current attempt wrote, as its worker last reported.", reportLabels, nil)
	descReportBytesIn  = prometheus.NewDesc("eddy_job_task_bytes_in_total", "Key and value bytes of the records a task read, as its worker last reported.", reportLabels, nil)
	descReportBytesOut = prometheus.NewDesc("eddy_job_task_bytes_out_total", "Key and value bytes of the records a task wrote, as its worker last reported.", reportLabels, nil)
	descReportBP       = prometheus.NewDesc("eddy_job_task_backpressure_ratio", "Share of its run time a task spent backpressured, in [0, 1], as its worker last reported.", reportLabels, nil)
	descReportWM       = prometheus.NewDesc("eddy_job_task_watermark_milliseconds", "A task's watermark, ms since the epoch, as its worker last reported (absent before the first).", reportLabels, nil)
	descReportPending  = prometheus.NewDesc("eddy_job_task_source_pending_records", "Records waiting for a source task, as its worker last reported (absent when unknown).", reportLabels, nil)
)

// swapOutcomes are the outcomes always exported (0 until one happens), so
// that a query need not guess which exist.
var swapOutcomes = []fsm.SwapState{fsm.SwapSwapped, fsm.SwapRefused, fsm.SwapFailed, fsm.SwapRolledBack}

// Collector returns the collector of the coordinator's metrics: its Raft
// member's, and, while it leads, its jobs'.
func (c *Coordinator) Collector() prometheus.Collector { return (*collector)(c) }

type collector Coordinator

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCheckpointsCompleted, descCheckpointsFailed, descLastDuration, descLastSize,
		descLastIncremental, descRestarts, descSwaps, descJobRunning, descReportIn, descReportOut, descReportBytesIn, descReportBytesOut, descReportBP, descReportWM, descReportPending} {
		ch <- d
	}
	if c.node != nil {
		c.node.Collector().Describe(ch)
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	co := (*Coordinator)(c)
	if co.node == nil {
		return
	}
	co.node.Collector().Collect(ch)
	if !co.node.IsLeader() {
		return
	}
	co.mu.Lock()
	t := co.term
	co.mu.Unlock()
	var idx reportIndex
	if t != nil {
		idx = t.index(co.fsm.Workers())
	}
	for _, j := range co.fsm.AllJobs() {
		if j.State.Terminal() {
			// Finished jobs leave the metrics, as in Flink; their history
			// is in eddy job status.
			continue
		}
		lv := []string{j.Tenant, j.ID, j.Name}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
		}
		n := co.fsm.JobCounters(j.ID)
		counter(descCheckpointsCompleted, float64(n.CheckpointsCompleted))
		counter(descCheckpointsFailed, float64(n.CheckpointsFailed))
		counter(descRestarts, float64(j.Restarts))
		running := 0.0
		if j.State == fsm.JobRunning {
			running = 1
		}
		gauge(descJobRunning, running)
		if cp, ok := j.LatestCompleted(); ok {
			gauge(descLastDuration, cp.Duration.Seconds())
			gauge(descLastSize, float64(cp.FullSize))
			gauge(descLastIncremental, float64(cp.IncrementalSize))
		}
		for _, o := range swapOutcomes {
			ch <- prometheus.MustNewConstMetric(descSwaps, prometheus.CounterValue, float64(n.Swaps[o]),
				j.Tenant, j.ID, j.Name, strings.ToLower(string(o)))
		}
		if idx.tasks != nil && j.State == fsm.JobRunning {
			reportMetrics(ch, &j, idx)
		}
	}
}

// reportMetrics exports the task reports of a running job's attempt.
func reportMetrics(ch chan<- prometheus.Metric, j *fsm.Job, idx reportIndex) {
	for _, task := range j.Tasks {
		m := idx.tasks[taskKey{j.ID, j.Attempt, task}].GetMetrics()
		if m == nil {
			continue
		}
		lv := []string{j.Tenant, j.ID, j.Name, task, j.Deployment[task]}
		ch <- prometheus.MustNewConstMetric(descReportIn, prometheus.CounterValue, float64(m.GetRecordsIn()), lv...)
		ch <- prometheus.MustNewConstMetric(descReportOut, prometheus.CounterValue, float64(m.GetRecordsOut()), lv...)
		ch <- prometheus.MustNewConstMetric(descReportBytesIn, prometheus.CounterValue, float64(m.GetBytesIn()), lv...)
		ch <- prometheus.MustNewConstMetric(descReportBytesOut, prometheus.CounterValue, float64(m.GetBytesOut()), lv...)
		ch <- prometheus.MustNewConstMetric(descReportBP, prometheus.GaugeValue, m.GetBackpressureRatio(), lv...)
		if wm := m.GetWatermarkMs(); wm != math.MinInt64 && wm != math.MaxInt64 {
			ch <- prometheus.MustNewConstMetric(descReportWM, prometheus.GaugeValue, float64(wm), lv...)
		}
		if m.PendingRecords != nil {
			ch <- prometheus.MustNewConstMetric(descReportPending, prometheus.GaugeValue, float64(m.GetPendingRecords()), lv...)
		}
	}
}

// Ready says whether this member is in a Raft group with a known leader:
// nil, or why not.
func (c *Coordinator) Ready() error {
	if c.node == nil {
		return errors.New("not started")
	}
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return errors.New("shutting down")
	}
	if id, _ := c.node.Leader(); id == "" {
		return errors.New("no known Raft leader (state " + c.node.State() + ")")
	}
	return nil
}

// AuthorizeMetrics decides what a scrape of /metrics may see, from its
// "Authorization: Bearer <token>" header, checked as the Control service
// checks a call's token against this member's FSM: an admin sees every
// series, any other role its tenant's only. Its errors are one line and
// never contain the token.
func (c *Coordinator) AuthorizeMetrics(r *http.Request) (metricsrv.Scope, error) {
	vals := r.Header.Values("Authorization")
	if len(vals) == 0 {
		return metricsrv.Scope{}, errors.New(noToken)
	}
	tok, err := c.checkToken(vals)
	if err != nil {
		return metricsrv.Scope{}, errors.New(status.Convert(err).Message())
	}
	if tok.Role == fsm.RoleAdmin {
		return metricsrv.Scope{All: true}, nil
	}
	return metricsrv.Scope{Tenant: tok.Tenant}, nil
}
