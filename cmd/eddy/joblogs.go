package main

// `eddy job logs`: the log lines of a job's tasks that the leader holds
// (guest output and task errors, shipped by the workers with their
// heartbeats), optionally followed until the job ends.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// followWait is how long one JobLogs call of --follow may be held by the
// leader; a line or the job's end answers it sooner.
const followWait = 10 * time.Second

// followRetry bounds how long --follow keeps retrying a coordinator that
// does not answer (a leader election), with a backoff.
const followRetry = time.Minute

// jobLogs prints the lines of job after seq since; with follow, it goes
// on printing lines as they come until the job is terminal (after its
// final lines) or Ctrl-C. Each call has --timeout; the command as a whole
// has none when it follows.
func jobLogs(c eddyv1.ControlClient, cf clientFlags, job string, since uint64, follow bool, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	after, epoch := since, uint64(0)
	var wait time.Duration
	if follow {
		wait = followWait
	}
	var failingSince time.Time
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, wait+cf.timeout)
		resp, err := c.JobLogs(cctx, &eddyv1.JobLogsRequest{Tenant: cf.tenant, JobId: job, AfterSeq: after,
			Epoch: epoch, WaitMs: uint32(wait.Milliseconds())})
		cancel()
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		if err != nil {
			code := status.Code(err)
			if !follow || code != codes.Unavailable && code != codes.DeadlineExceeded {
				return rpcError("logs of "+job, err)
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) > followRetry {
				return rpcError("logs of "+job, err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		failingSince, backoff = time.Time{}, 100*time.Millisecond
		lines := resp.GetLines()
		if len(lines) > 0 && (epoch == 0 || epoch == resp.GetEpoch()) {
			if first := resp.GetFirstSeq(); after > 0 && first > after+1 && lines[0].GetSeq() == first {
				fmt.Fprintf(stdout, "… %d lines dropped: older than what the coordinator keeps\n", first-after-1)
			}
		}
		for _, l := range lines {
			printLogEntry(stdout, l.GetEntry())
		}
		after, epoch = resp.GetNextSeq(), resp.GetEpoch()
		switch {
		case len(lines) > 0:
			// More may be waiting beyond the answer's limit.
		case !follow, terminalState(resp.GetState()):
			return nil
		}
	}
}

func terminalState(s eddyv1.JobState) bool {
	return s == eddyv1.JobState_JOB_STATE_FINISHED || s == eddyv1.JobState_JOB_STATE_FAILED ||
		s == eddyv1.JobState_JOB_STATE_CANCELED
}

// printLogEntry prints `TIME TASK LEVEL [stream] message`; TASK is "-" for
// a line of a whole deployment, and [stream] is there for guest output
// only.
func printLogEntry(w io.Writer, e *eddyv1.LogEntry) {
	stream := ""
	if s := e.GetStream(); s != "" {
		stream = "[" + s + "] "
	}
	fmt.Fprintf(w, "%s %s %s %s%s\n", time.UnixMilli(e.GetTimeUnixMs()).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		cmp.Or(e.GetTask(), "-"), e.GetLevel(), stream, e.GetMessage())
}
