package udfs_test

// The version 2 half of the harness: the guest's keyed state, timers and
// time are a keyedhost.Host (internal/testkit/keyedhost, which checks the
// rules a guest SDK must follow); here the test moves the watermark and
// the clock and fires the timers that are due, as the real host does.

import (
	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/internal/testkit/keyedhost"
)

// timerBatchSize is how many fired timers one eddy_on_timer call gets at
// most, so that advancing far spreads timers over several calls.
const timerBatchSize = 16

// fire hands the guest every timer of kind due at upTo, in (time, key)
// order, in batches, and then any that the guest set meanwhile and that are
// due too, as a watermark or the clock moving to upTo does.
func (g *guest) fire(kind int32, upTo int64) error {
	g.t.Helper()
	h := g.calls.keyed
	for {
		due := h.Due(kind, upTo, timerBatchSize)
		if len(due) == 0 {
			return nil
		}
		g.calls.fired = append(g.calls.fired, due...)
		recs := keyedhost.TimerRecords(due)
		batch := abi.AppendBatch(nil, recs)
		ptr := g.write(batch)
		end := h.Batch(recs)
		res := g.call(abi.ExportOnTimer, uint64(ptr), uint64(len(batch)))
		end()
		if err := g.status(abi.ExportOnTimer, res); err != nil {
			return err
		}
	}
}

// advanceWatermark moves the event-time watermark to wm and fires the
// event-time timers due.
func (g *guest) advanceWatermark(wm int64) error {
	g.t.Helper()
	g.calls.keyed.Watermark = wm
	return g.fire(abi.TimerEventTime, wm)
}

// advanceClock moves processing time to now and fires the processing-time
// timers due.
func (g *guest) advanceClock(now int64) error {
	g.t.Helper()
	g.calls.keyed.Now = now
	return g.fire(abi.TimerProcessingTime, now)
}
