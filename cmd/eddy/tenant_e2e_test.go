package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// TestTenantCLI drives `eddy tenant` against a standalone process, and the
// quotas a real job meets: a module above module_bytes is refused, a job
// beyond the tenant's slots is refused, a stateful job whose keyed state
// outgrows state_bytes fails with the quota's line, and hostile modules
// fail at the tenant's memory and call deadline bounds.
func TestTenantCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	cli := standaloneCLI(t, dir, "--data-dir", filepath.Join(dir, "data"), "--restart", "none")
	must := func(args ...string) string {
		t.Helper()
		r := cli(args...)
		if r.code != 0 {
			t.Fatalf("eddy %s: %d %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	refused := func(want string, args ...string) {
		t.Helper()
		r := cli(args...)
		if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Fatalf("eddy %s: %d %q, want one line with %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}

	if out := must("tenant", "create", "acme", "--slots", "2", "--module-bytes", "32KiB", "--state-bytes", "100"); out != "tenant acme created\n" {
		t.Fatalf("create: %q", out)
	}
	refused("tenant acme already exists", "tenant", "create", "acme")
	refused("tenant id \"Bad\"", "tenant", "create", "Bad")
	if r := cli("tenant", "create", "x", "--module-bytes", "lots"); r.code != 2 || !strings.Contains(r.stderr, "want a size") {
		t.Fatalf("bad size: %d %s", r.code, r.stderr)
	}

	// quota: only the flags given change; without flags, the quota.
	must("tenant", "quota", "acme", "--jobs", "3", "--call-timeout", "2s")
	q := must("tenant", "quota", "acme")
	for _, line := range []string{`(?m)^slots\s+2\s+0`, `(?m)^jobs\s+3\s+0`, `(?m)^module-bytes\s+32768\s+-`,
		`(?m)^call-timeout\s+2s\s+-`, `(?m)^state-bytes\s+100\s+-`, `(?m)^memory-bytes\s+none\s+-`} {
		if !regexp.MustCompile(line).MatchString(q) {
			t.Fatalf("tenant quota acme: no line %s in\n%s", line, q)
		}
	}
	list := must("tenant", "list")
	if !regexp.MustCompile(`(?m)^acme\s+0/2\s+0/3\s+0/-\s+0/-\s+module-bytes=32768 call-timeout=2s state-bytes=100$`).MatchString(list) ||
		!regexp.MustCompile(`(?m)^default\s+0/-\s+0/-\s+0/-\s+0/-\s+-$`).MatchString(list) {
		t.Fatalf("tenant list:\n%s", list)
	}

	// module_bytes: a real module of 53 KB, refused before validation.
	echo := filepath.Join(repoRoot(t), "host", "testdata", "echo.wasm")
	refused("tenant acme: module echo is 53938 bytes, above the quota module_bytes=32768",
		"module", "upload", echo, "--name", "echo", "--tenant", "acme")
	must("module", "upload", echo, "--name", "echo") // the default tenant has no such quota

	// slots: more than the quota at all is refused at submission.
	wide, _ := inlineSpec(t, strings.Replace(checkpointedJob, "parallelism: 2", "parallelism: 3", 1))
	refused("tenant acme: the job needs", "job", "submit", wide, "--tenant", "acme")

	// state_bytes: the windows' keyed state of a stateful job outgrows
	// 100 bytes; its checkpoint (the leader, summing the job's tasks) or
	// the task itself (measuring every second) finds it, and the job
	// fails with the line. Without checkpoints, the task does.
	var st string
	for _, tc := range []struct {
		name string
		spec string
		line string
	}{
		{"checkpointed", strings.Replace(checkpointedJob, "parallelism: 2", "parallelism: 1", 1),
			`(job \S+: keyed state [0-9.]+ [KMG]?i?B exceeds tenant acme's quota state_bytes=100|keyed state \d+ bytes exceeds the job's limit state_bytes=100)`},
		// (On the memory backend: Pebble's measure leaves out what its
		// memtable holds, more than these few hundred bytes.)
		{"not checkpointed", strings.Replace(strings.Replace(checkpointedJob, "parallelism: 2", "parallelism: 1\nstate_backend: memory", 1), "checkpoint:\n  interval: 300ms\n  retain: 2\n", "", 1),
			`task \S+: keyed state \d+ bytes exceeds the job's limit state_bytes=100 \(its tenant's quota\)`},
	} {
		if tc.name == "not checkpointed" && strings.Contains(tc.spec, "checkpoint:") {
			t.Fatal("the spec still checkpoints")
		}
		spec, _ := inlineSpec(t, tc.spec)
		id := strings.TrimSpace(must("job", "submit", spec, "--tenant", "acme"))
		testkit.Eventually(t, time.Minute, "the "+tc.name+" job to fail on its state_bytes quota", func() bool {
			st = cli("job", "status", id, "--tenant", "acme").stdout
			return strings.Contains(st, "FAILED,")
		})
		t.Logf("status of the failed %s job:\n%s", tc.name, st)
		if !regexp.MustCompile(tc.line).MatchString(st) {
			t.Fatalf("%s job status:\n%s", tc.name, st)
		}
	}

	// memory_bytes and call_timeout_ms: the worker bounds each instance of
	// the tenant's tasks below its own limits (64 MiB, 5 s).
	must("tenant", "create", "lim", "--memory-bytes", "4MiB", "--call-timeout", "300ms")
	for _, tc := range []struct{ module, want string }{
		{"grow_bomb", "memory limit of 4 MiB reached"},
		{"loop", "exceeded its 300ms deadline"},
	} {
		must("module", "upload", filepath.Join(repoRoot(t), "host", "testdata", tc.module+".wasm"), "--name", tc.module, "--tenant", "lim")
		spec, _ := inlineSpec(t, strings.Replace(wasmJob, "MODULE", tc.module, 1))
		id := strings.TrimSpace(must("job", "submit", spec, "--tenant", "lim"))
		testkit.Eventually(t, time.Minute, "the "+tc.module+" job to fail", func() bool {
			st = cli("job", "status", id, "--tenant", "lim").stdout
			return strings.Contains(st, "FAILED,")
		})
		if !strings.Contains(st, tc.want) {
			t.Fatalf("job status of %s, want %q:\n%s", tc.module, tc.want, st)
		}
	}

	// delete: refused while a job lives, then done.
	spec, _ := inlineSpec(t, strings.Replace(checkpointedJob, "parallelism: 2", "parallelism: 1", 1))
	id2 := strings.TrimSpace(must("job", "submit", spec, "--tenant", "acme"))
	refused("tenant acme has 1 jobs that have not ended: cancel them first", "tenant", "delete", "acme")
	must("job", "cancel", id2, "--tenant", "acme")
	if out := must("tenant", "delete", "acme"); out != "tenant acme deleted\n" {
		t.Fatalf("delete: %q", out)
	}
	refused("tenant acme not found", "tenant", "delete", "acme")
}
