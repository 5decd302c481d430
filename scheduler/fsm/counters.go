package fsm

// The counters behind the coordinator's job metrics. They count what this
// process applied, and are not part of the replicated state: a snapshot
// stays byte for byte what members of other versions write, and restoring
// one leaves the counters alone, so that they only ever grow while the
// process lives (a new process starts them at zero, which Prometheus reads
// as a counter reset). They are kept here rather than in the leader
// because swaps end inside commands (a restart rolls one back) that only
// the applier sees.

import "maps"

// JobCounters count one job's checkpoint and swap outcomes.
type JobCounters struct {
	// CheckpointsCompleted and CheckpointsFailed count checkpoints and
	// savepoints.
	CheckpointsCompleted, CheckpointsFailed uint64
	// Swaps counts hot swaps by the state each reached: SWAPPED, REFUSED,
	// FAILED, ROLLED_BACK (a swap rolled back counted as SWAPPED first).
	Swaps map[SwapState]uint64
}

type counters struct {
	jobs map[string]*JobCounters
}

func (c *counters) job(id string) *JobCounters {
	j := c.jobs[id]
	if j == nil {
		j = &JobCounters{Swaps: map[SwapState]uint64{}}
		c.jobs[id] = j
	}
	return j
}

func (j *JobCounters) count(s SwapState) { j.Swaps[s]++ }

// JobCounters returns the counters of a job (zero for one this process
// has applied nothing of).
func (f *FSM) JobCounters(id string) JobCounters {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.counts.jobs[id]
	if j == nil {
		return JobCounters{Swaps: map[SwapState]uint64{}}
	}
	return JobCounters{CheckpointsCompleted: j.CheckpointsCompleted, CheckpointsFailed: j.CheckpointsFailed, Swaps: maps.Clone(j.Swaps)}
}
