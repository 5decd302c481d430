package worker

import "testing"

func TestCheckpointOf(t *testing.T) {
	tests := []struct{ key, want string }{
		{"tenants/default/jobs/job-3/chk/12/_manifest.json", "12"},
		{"tenants/default/savepoints/job-3-7/_manifest.json", "7"},
		{"tenants/default/savepoints/odd/_manifest.json", "tenants/default/savepoints/odd/_manifest.json"},
		{"tenants/default/jobs/job-3/chk/x/_manifest.json", "tenants/default/jobs/job-3/chk/x/_manifest.json"},
	}
	for _, tc := range tests {
		if got := checkpointOf(tc.key); got != tc.want {
			t.Errorf("checkpointOf(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
