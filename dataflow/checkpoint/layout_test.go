package checkpoint

import "testing"

// TestLayout pins every key of the layout: checkpoints and savepoints
// written before this package existed are read with the same keys.
func TestLayout(t *testing.T) {
	root := JobRoot("default", "job-3")
	sp := SavepointDir("acme", "job-3", 7)
	for _, tc := range []struct{ name, got, want string }{
		{"tenant root", TenantRoot("acme"), "tenants/acme"},
		{"job root", root, "tenants/default/jobs/job-3"},
		{"checkpoints", CheckpointsPrefix(root), "tenants/default/jobs/job-3/chk/"},
		{"checkpoint dir", CheckpointDir(root, 12), "tenants/default/jobs/job-3/chk/12/"},
		{"manifest", ManifestKey(root, 12), "tenants/default/jobs/job-3/chk/12/_manifest.json"},
		{"task manifest", TaskManifestKey(root, 12, "per_card[2]"), "tenants/default/jobs/job-3/chk/12/per_card[2].json"},
		{"shared", SharedPrefix(root), "tenants/default/jobs/job-3/shared/"},
		{"state file", StateFileKey(root, "shared/ab12"), "tenants/default/jobs/job-3/shared/ab12"},
		{"savepoint dir", sp, "tenants/acme/savepoints/job-3-7"},
		{"savepoint manifest", SavepointManifestKey(sp), "tenants/acme/savepoints/job-3-7/_manifest.json"},
		{"savepoint of manifest", SavepointDirOf(SavepointManifestKey(sp)), sp},
		{"savepoint task manifest", TaskManifestKey(sp, 7, "src[0]"), "tenants/acme/savepoints/job-3-7/chk/7/src[0].json"},
		{"savepoint state file", StateFileKey(sp, "shared/ab12"), "tenants/acme/savepoints/job-3-7/shared/ab12"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestParseSavepointPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"tenants/default/savepoints/job-3-5", "tenants/default/savepoints/job-3-5/_manifest.json"},
		{"tenants/default/savepoints/job-3-5/", "tenants/default/savepoints/job-3-5/_manifest.json"},
		{" tenants/default/savepoints/job-3-5/_manifest.json\n", "tenants/default/savepoints/job-3-5/_manifest.json"},
		{"tenants/default/jobs/job-3/chk/4", "tenants/default/jobs/job-3/chk/4/_manifest.json"},
		{"/abs/path", ""},
		{"a/../b", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, err := ParseSavepointPath(tc.in)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("ParseSavepointPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestRootOf(t *testing.T) {
	tests := []struct{ key, want string }{
		{"tenants/default/jobs/job-3/chk/12/per_card[2].json", "tenants/default/jobs/job-3"},
		{"tenants/default/savepoints/job-3-7/chk/7/src[0].json", "tenants/default/savepoints/job-3-7"},
		{"tenants/default/jobs/chk/chk/1/a.json", "tenants/default/jobs/chk"}, // a job named chk
		{"p/chk/7/a[0].json", "p"},
		{"chk/7/a.json", ""},                 // no root
		{"p/chk/x/a.json", ""},               // not an id
		{"p/chk/0/a.json", ""},               // ids start at 1
		{"p/chk/7/", ""},                     // no file
		{"p/shared/7/a.json", ""},            // not under chk/
		{"tenants/default/jobs/job-3", ""},   // a root
		{"tenants/default/jobs/job-3/x", ""}, // something else
		{"", ""},
	}
	for _, tc := range tests {
		got, err := RootOf(tc.key)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("RootOf(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
	// RootOf inverts TaskManifestKey.
	root := JobRoot("t", "j")
	if got, err := RootOf(TaskManifestKey(root, 3, "x[1]")); err != nil || got != root {
		t.Errorf("RootOf(TaskManifestKey(%q)) = %q, %v", root, got, err)
	}
}
