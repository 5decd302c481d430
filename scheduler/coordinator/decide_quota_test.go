package coordinator

import (
	"reflect"
	"testing"

	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// TestDecideTenantSlots: the slots quota holds a job back even where the
// cluster has room, and its status names the tenant's quota and usage.
func TestDecideTenantSlots(t *testing.T) {
	submit := func(s *sim, tenant string, tasks ...string) string {
		return s.must(&fsm.SubmitJob{Numbered: true, Tenant: tenant, Name: "j", Tasks: tasks}).(fsm.Job).ID
	}
	tests := []struct {
		name  string
		setup func(s *sim)
		want  []fsm.Command
	}{
		{
			name: "within the quota: placed",
			setup: func(s *sim) {
				submit(s, "acme", "a", "b")
			},
			want: []fsm.Command{&fsm.PlaceJob{JobID: "job-1", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}}},
		},
		{
			name: "beyond the quota with the cluster free: the second job waits for the tenant",
			setup: func(s *sim) {
				submit(s, "acme", "a", "b")
				submit(s, "acme", "c", "d")
			},
			want: []fsm.Command{
				&fsm.PlaceJob{JobID: "job-1", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2"}},
				&fsm.JobWaiting{JobID: "job-2", Message: "waiting for tenant acme's slots: quota slots=3, 2 in use, the job needs 2"},
			},
		},
		{
			name: "slots held by a running job count",
			setup: func(s *sim) {
				id := submit(s, "acme", "a", "b", "c")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1", "c": "w2"}})
				submit(s, "acme", "d")
			},
			want: []fsm.Command{&fsm.JobWaiting{JobID: "job-2", Message: "waiting for tenant acme's slots: quota slots=3, 3 in use, the job needs 1"}},
		},
		{
			name: "a finished task frees its slot of the quota",
			setup: func(s *sim) {
				id := submit(s, "acme", "a", "b", "c")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1", "c": "w2"}})
				s.must(&fsm.TaskFinished{JobID: id, Attempt: 1, TaskID: "a"})
				submit(s, "acme", "d")
			},
			want: []fsm.Command{&fsm.PlaceJob{JobID: "job-2", Attempt: 1, Deployment: map[string]string{"d": "w1"}}},
		},
		{
			name: "another tenant is not held back by acme's quota",
			setup: func(s *sim) {
				submit(s, "acme", "a", "b", "c")
				submit(s, "acme", "x")
				submit(s, fsm.DefaultTenant, "y", "z")
			},
			want: []fsm.Command{
				&fsm.PlaceJob{JobID: "job-1", Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w2", "c": "w1"}},
				&fsm.JobWaiting{JobID: "job-2", Message: "waiting for tenant acme's slots: quota slots=3, 3 in use, the job needs 1"},
				&fsm.PlaceJob{JobID: "job-3", Attempt: 1, Deployment: map[string]string{"y": "w2", "z": "w1"}},
			},
		},
		{
			name: "a job waiting for the tenant with the same message is not touched",
			setup: func(s *sim) {
				id := submit(s, "acme", "a", "b", "c")
				s.must(&fsm.PlaceJob{JobID: id, Attempt: 1, Deployment: map[string]string{"a": "w1", "b": "w1", "c": "w2"}})
				w := submit(s, "acme", "d")
				s.must(&fsm.JobWaiting{JobID: w, Message: "waiting for tenant acme's slots: quota slots=3, 3 in use, the job needs 1"})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t)
			s.must(&fsm.CreateTenant{ID: "acme", Quota: fsm.Quota{Slots: 3}})
			s.worker("w1", 4)
			s.worker("w2", 4)
			tt.setup(s)
			p := decide(s.round())
			if !reflect.DeepEqual(p.commands, tt.want) {
				t.Errorf("commands:\n got %s\nwant %s", dump(p.commands), dump(tt.want))
			}
		})
	}
}
