package coordinator

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// Bounds of the leader's job logs. Logs are not state: they live in the
// leader's memory only, never in the FSM (see RATIONALE.md, "Job logs
// live in the leader's memory").
const (
	// maxLogLinesPerJob and maxLogBytesPerJob bound one job's lines; the
	// oldest go first.
	maxLogLinesPerJob = 5000
	maxLogBytesPerJob = 2 << 20
	// maxLogJobs bounds the jobs with lines; the one written to least
	// recently goes first.
	maxLogJobs = 256
	// maxLogWorkerInstances bounds the worker instances whose last
	// worker_seq is remembered (for dropping resent lines).
	maxLogWorkerInstances = 1024
	// maxJobLogsWait bounds a JobLogs long poll; defaultJobLogsLimit and
	// maxJobLogsLimit the lines of one answer.
	maxJobLogsWait      = 30 * time.Second
	defaultJobLogsLimit = 1000
	maxJobLogsLimit     = 10000
)

// logStore holds recent log lines of jobs, as workers ship them with
// their heartbeats and as task reports tell of failures, numbered per job.
// Safe for concurrent use.
type logStore struct {
	// epoch names this store's numbering of seq, so that a client whose
	// after_seq is another leader's is read from the oldest line.
	epoch uint64
	mu    struct {
		sync.Mutex
		jobs map[string]*jobLog // by job id (unique across tenants)
		// workerSeq is the highest worker_seq taken from each worker
		// instance.
		workerSeq map[string]uint64
		tick      uint64        // advances per write, for eviction
		changed   chan struct{} // closed and replaced at each write
	}
}

// jobLog is one job's lines, oldest first.
type jobLog struct {
	lines   []*eddyv1.JobLogLine
	next    uint64 // the seq of the next line
	bytes   int
	touched uint64
	// failed holds the task failures already logged from reports (a
	// worker repeats a FAILED report until it is released).
	failed map[taskKey]bool
}

func newLogStore() *logStore {
	s := &logStore{epoch: rand.Uint64() | 1}
	s.mu.jobs = map[string]*jobLog{}
	s.mu.workerSeq = map[string]uint64{}
	s.mu.changed = make(chan struct{})
	return s
}

// changed returns a channel closed at the next write.
func (s *logStore) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}

// ingest adds the lines of a heartbeat from worker instance, but those of
// jobs that exist not and those it already took (by worker_seq).
func (s *logStore) ingest(instance string, entries []*eddyv1.LogEntry, exists func(job string) bool) {
	if len(entries) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.mu.workerSeq[instance]
	wrote := false
	for _, e := range entries {
		if e.GetWorkerSeq() <= last || !exists(e.GetJobId()) {
			continue
		}
		last = e.GetWorkerSeq()
		s.appendLocked(e)
		wrote = true
	}
	if _, ok := s.mu.workerSeq[instance]; !ok && len(s.mu.workerSeq) >= maxLogWorkerInstances {
		// Forgetting the others only risks a resent line shown twice.
		clear(s.mu.workerSeq)
	}
	s.mu.workerSeq[instance] = last
	if wrote {
		s.notifyLocked()
	}
}

// taskFailed adds the line of a failed task's report, once per task and
// attempt.
func (s *logStore) taskFailed(r *eddyv1.TaskReport, now time.Time) {
	if r.GetState() != eddyv1.TaskState_TASK_STATE_FAILED {
		return
	}
	k := keyOf(r.GetTask())
	s.mu.Lock()
	defer s.mu.Unlock()
	if jl := s.mu.jobs[k.job]; jl != nil && (jl.failed[k] || jl.loggedError(k)) {
		// The worker's own line of the failure (shipped with the report,
		// so read first) says it already.
		jl.failed[k] = true
		return
	}
	msg := "task failed"
	if r.GetError() != "" {
		msg += ": " + r.GetError()
	}
	jl := s.appendLocked(&eddyv1.LogEntry{TimeUnixMs: now.UnixMilli(), JobId: k.job, Attempt: uint32(k.attempt), Task: k.task,
		Level: slog.LevelError.String(), Message: msg})
	jl.failed[k] = true
	s.notifyLocked()
}

// loggedError reports whether the job's lines hold an error of task k's
// own (not of its guest's output).
func (jl *jobLog) loggedError(k taskKey) bool {
	for _, l := range slices.Backward(jl.lines) {
		e := l.GetEntry()
		if e.GetTask() == k.task && e.GetAttempt() == uint32(k.attempt) && e.GetStream() == "" && e.GetLevel() == slog.LevelError.String() {
			return true
		}
	}
	return false
}

func (s *logStore) appendLocked(e *eddyv1.LogEntry) *jobLog {
	s.mu.tick++
	jl := s.mu.jobs[e.GetJobId()]
	if jl == nil {
		if len(s.mu.jobs) >= maxLogJobs {
			s.evictLocked()
		}
		jl = &jobLog{next: 1, failed: map[taskKey]bool{}}
		s.mu.jobs[e.GetJobId()] = jl
	}
	jl.touched = s.mu.tick
	jl.lines = append(jl.lines, &eddyv1.JobLogLine{Seq: jl.next, Entry: e})
	jl.next++
	jl.bytes += len(e.GetMessage()) + len(e.GetTask())
	drop := 0
	for len(jl.lines)-drop > maxLogLinesPerJob || jl.bytes > maxLogBytesPerJob && len(jl.lines)-drop > 1 {
		old := jl.lines[drop].GetEntry()
		jl.bytes -= len(old.GetMessage()) + len(old.GetTask())
		jl.lines[drop] = nil
		drop++
	}
	jl.lines = jl.lines[drop:]
	return jl
}

// evictLocked forgets the job written to least recently.
func (s *logStore) evictLocked() {
	var oldest string
	var at uint64
	for id, jl := range s.mu.jobs {
		if oldest == "" || jl.touched < at {
			oldest, at = id, jl.touched
		}
	}
	delete(s.mu.jobs, oldest)
}

// poke wakes the long polls as a write does: a report changed what the
// API says of a job's state (a canceled job is CANCELING until its
// workers report its tasks ended, which commits nothing).
func (s *logStore) poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyLocked()
}

func (s *logStore) notifyLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

// read returns up to limit lines of job after seq after of numbering
// epoch (0: this store's), the seq to read from next, and the lowest seq
// held (0: none). An after of another epoch, or beyond what this store
// numbered (the job's lines were evicted and numbered again), reads from
// the oldest.
func (s *logStore) read(job string, after, epoch uint64, limit int) (lines []*eddyv1.JobLogLine, next, first uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	jl := s.mu.jobs[job]
	if epoch != 0 && epoch != s.epoch {
		after = 0
	}
	if jl == nil {
		return nil, 0, 0
	}
	if after >= jl.next {
		after = 0
	}
	if len(jl.lines) > 0 {
		first = jl.lines[0].GetSeq()
	}
	next = after
	for _, l := range jl.lines {
		if l.GetSeq() <= after {
			continue
		}
		if len(lines) == limit {
			break
		}
		lines = append(lines, l)
		next = l.GetSeq()
	}
	return lines, next, first
}

func terminalJobState(s eddyv1.JobState) bool {
	return s == eddyv1.JobState_JOB_STATE_FINISHED || s == eddyv1.JobState_JOB_STATE_FAILED ||
		s == eddyv1.JobState_JOB_STATE_CANCELED
}

// jobLogs answers JobLogs: the job is found by tenant first, exactly as
// for JobStatus, so that another tenant's job is NOT_FOUND. A long poll
// wakes on a new line and on any state change (the job may have ended).
func (c *Coordinator) jobLogs(ctx context.Context, t *term, req *eddyv1.JobLogsRequest) (*eddyv1.JobLogsResponse, error) {
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit == 0:
		limit = defaultJobLogsLimit
	case limit > maxJobLogsLimit:
		limit = maxJobLogsLimit
	}
	wait := min(time.Duration(req.GetWaitMs())*time.Millisecond, maxJobLogsWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		logsChanged, stateChanged := c.logs.changed(), c.fsm.Changed()
		j, err := c.fsm.Job(tenant, req.GetJobId())
		if err != nil {
			return nil, notFound("job %s not found in tenant %s", req.GetJobId(), tenant)
		}
		lines, next, first := c.logs.read(j.ID, req.GetAfterSeq(), req.GetEpoch(), limit)
		state := apiJobState(&j, t.index(c.fsm.Workers()))
		if len(lines) > 0 || wait <= 0 || terminalJobState(state) {
			return &eddyv1.JobLogsResponse{Lines: lines, NextSeq: next, FirstSeq: first, State: state, Epoch: c.logs.epoch}, nil
		}
		select {
		case <-logsChanged:
		case <-stateChanged:
		case <-timer.C:
			wait = 0 // answer with what there is
		case <-t.ctx.Done():
			return nil, c.notLeader()
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}
