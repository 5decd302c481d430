package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// TestPrintStatus: `job status` prints the tasks of a job whose tasks have
// no metrics yet (waiting for slots, deploying, restarting) with "-" where
// a reported task has its figures.
func TestPrintStatus(t *testing.T) {
	running := eddyv1.TaskState_TASK_STATE_RUNNING
	tests := []struct {
		name  string
		state eddyv1.JobState
		tasks []*eddyv1.TaskStatus
		want  []string // the task lines, with runs of spaces as one
	}{
		{"waiting for slots", eddyv1.JobState_JOB_STATE_WAITING_FOR_SLOTS,
			[]*eddyv1.TaskStatus{{TaskId: "src[0]"}},
			[]string{"src[0] - - - - - -"}},
		{"deploying", eddyv1.JobState_JOB_STATE_DEPLOYING,
			[]*eddyv1.TaskStatus{{TaskId: "src[0]", State: eddyv1.TaskState_TASK_STATE_SCHEDULED, WorkerId: "w1"}},
			[]string{"src[0] SCHEDULED w1 - - - -"}},
		{"restarting, one task reported", eddyv1.JobState_JOB_STATE_RESTARTING,
			[]*eddyv1.TaskStatus{
				{TaskId: "src[0]", State: eddyv1.TaskState_TASK_STATE_FAILED, WorkerId: "w1", Error: "boom",
					Metrics: &eddyv1.TaskMetrics{RecordsIn: 0, RecordsOut: 7}},
				{TaskId: "src[1]", State: eddyv1.TaskState_TASK_STATE_SCHEDULED, WorkerId: "w2"},
			},
			[]string{"src[0] FAILED w1 0 7 0% - boom", "src[1] SCHEDULED w2 - - - -"}},
		{"running", eddyv1.JobState_JOB_STATE_RUNNING,
			[]*eddyv1.TaskStatus{{TaskId: "src[0]", State: running, WorkerId: "w1",
				Metrics: &eddyv1.TaskMetrics{RecordsIn: 10, RecordsOut: 5, BackpressureRatio: 0.25, PendingRecords: proto.Int64(3)}}},
			[]string{"src[0] RUNNING w1 10 5 25% 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			printStatus(&out, &eddyv1.JobStatusResponse{
				Job:   &eddyv1.JobSummary{JobId: "job-1", Name: "j", State: tc.state},
				Tasks: tc.tasks,
			})
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[1], "TASK") {
				t.Fatalf("no task table:\n%s", out.String())
			}
			var got []string
			for _, l := range lines[2:] {
				got = append(got, strings.Join(strings.Fields(l), " "))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("task lines\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestSubmitAndStatusCLI: as a new user would see them on a standalone
// process, jobs are numbered job-1, job-2, and `job status` of a job whose
// tasks have no metrics yet (it waits for slots) prints them.
func TestSubmitAndStatusCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	cli := standaloneCLI(t, dir, "--data-dir", filepath.Join(dir, "data"), "--slots", "1")
	// Two tasks, one slot: the jobs wait.
	spec, _ := inlineSpec(t, "name: wide\nparallelism: 2\n"+strings.TrimPrefix(foreverJob, "name: forever\n"))
	for _, want := range []string{"job-1", "job-2"} {
		r := cli("job", "submit", spec)
		if got := strings.TrimSpace(r.stdout); r.code != 0 || got != want {
			t.Fatalf("submit: %q, want %s (exit %d: %s)", got, want, r.code, r.stderr)
		}
	}
	r := cli("job", "status", "job-1")
	if r.code != 0 {
		t.Fatalf("job status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"job job-1 (wide): WAITING_FOR_SLOTS", "waiting for slots: job needs 2, 1 free", "seq[0]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job status lacks %q:\n%s", want, r.stdout)
		}
	}
}
