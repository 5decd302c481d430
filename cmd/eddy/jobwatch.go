package main

// `eddy job status --watch`: the status redrawn every --interval until the
// job ends (or Ctrl-C); on a terminal the screen is redrawn in place, else
// the blocks follow one another, each headed by the time it was taken.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// watchStatus prints the job's status every interval until it is
// terminal. It returns nil when the job finished (or on Ctrl-C) and an
// error naming the state and message when it failed or was canceled, so
// that a script's `eddy job status --watch` tells how the job ended.
func watchStatus(c eddyv1.ControlClient, cf clientFlags, job string, interval time.Duration, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tty := isTerminal(stdout)
	var failingSince time.Time
	for {
		cctx, cancel := context.WithTimeout(ctx, cf.timeout)
		resp, err := c.JobStatus(cctx, &eddyv1.JobStatusRequest{Tenant: cf.tenant, JobId: job})
		cancel()
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		switch code := status.Code(err); {
		case err == nil:
			failingSince = time.Time{}
			drawStatus(stdout, tty, resp, time.Now())
			if j := resp.GetJob(); terminalState(j.GetState()) {
				return watchOutcome(j)
			}
		case code != codes.Unavailable && code != codes.DeadlineExceeded:
			return rpcError("job "+job, err)
		case failingSince.IsZero():
			// A leader election: the next round asks again.
			failingSince = time.Now()
		case time.Since(failingSince) > followRetry:
			return rpcError("job "+job, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// drawStatus prints one block: on a terminal it replaces the screen
// (cursor home, clear), so the status stays in place.
func drawStatus(w io.Writer, tty bool, resp *eddyv1.JobStatusResponse, at time.Time) {
	var b bytes.Buffer
	if tty {
		b.WriteString("\x1b[H\x1b[2J")
	}
	fmt.Fprintf(&b, "-- %s\n", at.UTC().Format(time.RFC3339))
	printStatus(&b, resp)
	if !tty {
		b.WriteString("\n")
	}
	_, _ = w.Write(b.Bytes()) // one write: a reader never sees half a block
}

// watchOutcome is the result of a watch whose job ended.
func watchOutcome(j *eddyv1.JobSummary) error {
	if j.GetState() == eddyv1.JobState_JOB_STATE_FINISHED {
		return nil
	}
	msg := strings.ToLower(jobState(j.GetState()))
	if m := j.GetMessage(); m != "" {
		msg += ": " + m
	}
	return fmt.Errorf("job %s %s", j.GetJobId(), msg)
}
