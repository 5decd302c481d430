package main

// The progress of `eddy run` on stderr: on a terminal one line redrawn in
// place, otherwise a plain line every few seconds (none for a job that
// ends sooner, so that scripts and short runs see only the summary).

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/dataflow"
)

// progressMode is the value of --progress.
type progressMode string

const (
	progressAuto   progressMode = "auto"   // a live line on a terminal, plain lines otherwise
	progressAlways progressMode = "always" // as auto, and a final line even for a short job
	progressNever  progressMode = "never"  // quiet: the summary only
)

// Set implements flag.Value.
func (m *progressMode) Set(s string) error {
	switch progressMode(s) {
	case progressAuto, progressAlways, progressNever:
		*m = progressMode(s)
		return nil
	}
	return fmt.Errorf("%q is not one of auto, always, never", s)
}

func (m *progressMode) String() string { return string(*m) }

// isTerminal reports whether w is a character device (a terminal), with
// no dependency beyond os: what decides between the live line and plain
// lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressSample is what one look at a running job's counters gave.
type progressSample struct {
	at      time.Time
	records int64 // out of every source node
	// fraction in [0,1] of the input read, when known.
	fraction float64
	hasFrac  bool
}

// sampleNodes sums the source nodes' output and derives the job's
// fraction done: the least advanced source's, since a bounded job ends
// when its last source does. It is unknown if one source cannot tell.
func sampleNodes(nodes []dataflow.NodeSummary, at time.Time) progressSample {
	s := progressSample{at: at, fraction: 1}
	sources := 0
	for _, n := range nodes {
		if n.Kind != "source" {
			continue
		}
		sources++
		s.records += n.Out
		if !n.ProgressKnown || n.Total <= 0 {
			s.fraction = -1
			continue
		}
		if s.fraction >= 0 {
			s.fraction = min(s.fraction, min(1, float64(n.Done)/float64(n.Total)))
		}
	}
	s.hasFrac = sources > 0 && s.fraction >= 0
	if !s.hasFrac {
		s.fraction = 0
	}
	return s
}

// rateWindow is how far back the records/s of the live line looks: long
// enough to be steady, short enough to follow a change.
const rateWindow = 2 * time.Second

// progressPrinter renders samples; the caller feeds it from one goroutine.
type progressPrinter struct {
	w     io.Writer
	tty   bool
	every time.Duration // plain lines: the period, and the quiet start
	start time.Time

	samples   []progressSample // the last rateWindow, oldest first
	lastPrint time.Time
	lastLine  progressSample // the sample of the last plain line
	drawn     bool           // the live line is on the screen
}

func newProgressPrinter(w io.Writer, tty bool, every time.Duration, start time.Time) *progressPrinter {
	return &progressPrinter{w: w, tty: tty, every: every, start: start, lastPrint: start, lastLine: progressSample{at: start}}
}

// observe takes a sample and prints what it calls for.
func (p *progressPrinter) observe(s progressSample) {
	p.samples = append(p.samples, s)
	for len(p.samples) > 2 && s.at.Sub(p.samples[1].at) >= rateWindow {
		p.samples = p.samples[1:]
	}
	if p.tty {
		rate := rateBetween(p.samples[0], s)
		fmt.Fprintf(p.w, "\r\x1b[K%s", progressLine(s, rate, s.at.Sub(p.start)))
		p.drawn = true
		return
	}
	if s.at.Sub(p.lastPrint) < p.every {
		return
	}
	// A plain line's rate is that of the period it reports.
	fmt.Fprintln(p.w, progressLine(s, rateBetween(p.lastLine, s), s.at.Sub(p.start)))
	p.lastPrint, p.lastLine = s.at, s
}

// finish clears the live line, so the summary starts a clean one; with
// final (--progress always) a plain printer reports the end as well.
func (p *progressPrinter) finish(last progressSample, final bool) {
	if p.tty {
		if p.drawn {
			fmt.Fprint(p.w, "\r\x1b[K")
			p.drawn = false
		}
		return
	}
	if final {
		fmt.Fprintln(p.w, progressLine(last, rateBetween(p.lastLine, last), last.at.Sub(p.start)))
	}
}

func rateBetween(a, b progressSample) float64 {
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(b.records-a.records) / d
}

// progressLine is one report: "progress: 12345 records, 4.10k records/s,
// 42.0% done, ETA 11s, elapsed 8s" (no fraction nor ETA when the sources
// cannot tell their size).
func progressLine(s progressSample, rate float64, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "progress: %d records, %s", s.records, formatRate(rate))
	if s.hasFrac {
		fmt.Fprintf(&b, ", %s done", formatFraction(s.fraction))
		if eta, ok := estimateETA(elapsed, s.fraction); ok {
			fmt.Fprintf(&b, ", ETA %s", formatDuration(eta))
		} else {
			b.WriteString(", ETA -")
		}
	}
	fmt.Fprintf(&b, ", elapsed %s", formatDuration(elapsed))
	return b.String()
}

// formatRate is records per second with a k/M/G prefix and three
// significant digits: "850 records/s", "4.10k records/s".
func formatRate(r float64) string {
	if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		r = 0
	}
	units := []string{"", "k", "M", "G"}
	u := 0
	for r >= 999.5 && u < len(units)-1 {
		r /= 1000
		u++
	}
	switch {
	case u == 0:
		return fmt.Sprintf("%.0f records/s", r)
	case r < 9.995:
		return fmt.Sprintf("%.2f%s records/s", r, units[u])
	case r < 99.95:
		return fmt.Sprintf("%.1f%s records/s", r, units[u])
	default:
		return fmt.Sprintf("%.0f%s records/s", r, units[u])
	}
}

// formatFraction is a percentage with one decimal, never 100.0% before
// the end: rounding up would claim a job done that is not.
func formatFraction(f float64) string {
	f = max(0, min(1, f))
	pct := math.Floor(f*1000) / 10
	return fmt.Sprintf("%.1f%%", pct)
}

// estimateETA extrapolates the time left from the pace so far; it has
// none before any progress, or so early that the pace means nothing.
func estimateETA(elapsed time.Duration, fraction float64) (time.Duration, bool) {
	if fraction <= 0 || fraction > 1 || elapsed < 500*time.Millisecond {
		return 0, false
	}
	left := float64(elapsed) * (1 - fraction) / fraction
	if left > float64(100*24*time.Hour) {
		return 0, false
	}
	return time.Duration(left), true
}

// formatDuration is whole seconds, as a person reads a countdown: "8s",
// "1m05s", "2h03m".
func formatDuration(d time.Duration) string {
	d = max(0, d).Round(time.Second)
	if d >= time.Hour {
		d = d.Round(time.Minute) // the seconds are not shown
	}
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	default:
		return fmt.Sprintf("%ds", s)
	}
}

// liveProgress samples the job's counters until stop is called: every
// 250 ms for the live line, every `every` for plain lines.
type liveProgress struct {
	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}
}

func startProgress(p *progressPrinter, final bool, nodes func() []dataflow.NodeSummary) *liveProgress {
	lp := &liveProgress{quit: make(chan struct{}), done: make(chan struct{})}
	tick := 250 * time.Millisecond
	if !p.tty {
		tick = min(tick, p.every)
	}
	go func() {
		defer close(lp.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-lp.quit:
				p.finish(sampleNodes(nodes(), time.Now()), final)
				return
			case now := <-t.C:
				p.observe(sampleNodes(nodes(), now))
			}
		}
	}()
	return lp
}

// stop ends the sampling and waits until the line is cleared.
func (lp *liveProgress) stop() {
	lp.stopOnce.Do(func() { close(lp.quit) })
	<-lp.done
}
