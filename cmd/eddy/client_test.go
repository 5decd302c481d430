package main

import (
	"bytes"
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
