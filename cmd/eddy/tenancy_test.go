package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// eddyEnv runs the CLI with env added to (and overriding) the test's.
func eddyEnv(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(eddyBin, args...)
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache")), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, so.String(), se.String()}
}

// as runs a client command at coordinator i with token.
func (c *cluster) as(t testing.TB, token string, i int, args ...string) result {
	t.Helper()
	fields := strings.Fields(args[0])
	// A CLI configuration of its own: other tests' standalones save
	// contexts in the shared one, which a call without a token would use.
	env := []string{"EDDY_TOKEN=" + token, "EDDY_CONFIG=" + filepath.Join(t.TempDir(), "config.yaml")}
	return eddyEnv(t, env, append(append(fields, args[1:]...), "--coordinator", c.apis[i], "--timeout", "20s")...)
}

// refused checks that a command failed with every one of parts in its
// error line.
func refused(t testing.TB, r result, what string, parts ...string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("%s succeeded: %s", what, r.stdout)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Fatalf("%s: error %q does not say %q", what, strings.TrimSpace(r.stderr), p)
		}
	}
}

// TestTenantsOnACluster: three coordinators and two workers, tenants acme
// and beta. Through the leader and through a follower, a developer of acme
// cannot list, status, cancel, savepoint, restore from or fetch anything of
// beta's; a viewer cannot mutate; a call without a token, or with a bad
// one, is refused; a token revoked through the leader is refused at once
// by a follower; no process logs a token.
func TestTenantsOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	c := startCluster(t, 8)
	leader := c.leader(t)
	follower := (leader + 1) % 3
	admin := func(args ...string) result {
		t.Helper()
		r := c.as(t, testToken, leader, args...)
		if r.code != 0 {
			t.Fatalf("eddy %s: %s", args[0], r.stderr)
		}
		return r
	}
	admin("tenant create", "acme")
	admin("tenant create", "beta")
	token := func(tenant, role string) string {
		return strings.TrimSpace(admin("token create", "--tenant", tenant, "--role", role, "--description", "test").stdout)
	}
	devA, viewA, devB := token("acme", "developer"), token("acme", "viewer"), token("beta", "developer")

	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	// With checkpoints (to the coordinators' default storage), so that it
	// takes savepoints.
	spec, _ := inlineSpec(t, strings.Replace(strings.NewReplacer("RATE", "200", "MODULE", "counter").Replace(clusterJob),
		"parallelism: 4\n", "parallelism: 4\ncheckpoint: {interval: 1h}\n", 1))
	for _, tok := range []string{devA, devB} {
		if r := c.as(t, tok, leader, "module upload", module, "--name", "counter"); r.code != 0 {
			t.Fatalf("upload: %s", r.stderr)
		}
	}
	// beta's job runs, and takes a savepoint.
	r := c.as(t, devB, leader, "job submit", spec)
	if r.code != 0 {
		t.Fatalf("beta submit: %s", r.stderr)
	}
	jobB := regexp.MustCompile(`\S+-\d+|job-\d+`).FindString(r.stdout)
	if jobB == "" {
		t.Fatalf("no job id in %q", r.stdout)
	}
	testkit.Eventually(t, 60*time.Second, "beta's job running", func() bool {
		return strings.Contains(c.as(t, devB, leader, "job status", jobB).stdout, "RUNNING")
	})
	var savepoint string
	var last result
	testkit.Eventually(t, 60*time.Second, "a savepoint of beta's job", func() bool {
		last = c.as(t, devB, leader, "savepoint create", jobB)
		savepoint = regexp.MustCompile(`tenants/beta/savepoints/\S+`).FindString(last.stdout)
		return last.code == 0 && savepoint != ""
	})
	t.Logf("savepoint: %s", last.stdout)

	for _, at := range []int{leader, follower} {
		who := map[int]string{leader: "leader", follower: "follower"}[at]
		t.Run("acme developer through the "+who, func(t *testing.T) {
			if r := c.as(t, devA, at, "job list"); r.code != 0 || strings.Contains(r.stdout, jobB) {
				t.Fatalf("job list shows beta's job or fails: %d %s%s", r.code, r.stdout, r.stderr)
			}
			refused(t, c.as(t, devA, at, "job status", jobB), "status of beta's job", "not found")
			refused(t, c.as(t, devA, at, "job cancel", jobB), "cancel of beta's job", "not found")
			refused(t, c.as(t, devA, at, "savepoint create", jobB), "savepoint of beta's job", "not found")
			refused(t, c.as(t, devA, at, "job submit", spec, "--from-savepoint", savepoint), "restore from beta's savepoint", "not found")
			refused(t, c.as(t, devA, at, "job list", "--tenant", "beta"), "list naming beta", `tenant "beta" not found`)
			refused(t, c.as(t, devA, at, "module get", "counter@1", "--tenant", "beta", "-o", filepath.Join(t.TempDir(), "x.wasm")), "module of beta", "not found")
			refused(t, c.as(t, devA, at, "tenant create", "gamma"), "tenant create", "needs the admin role")
			refused(t, c.as(t, devA, at, "cluster info"), "cluster info", "needs the admin role")
			refused(t, c.as(t, devA, at, "audit list"), "audit list", "needs the admin role")
			refused(t, c.as(t, viewA, at, "job submit", spec), "viewer submit", "needs the developer role")
			refused(t, c.as(t, viewA, at, "module upload", module, "--name", "x"), "viewer upload", "needs the developer role")
			refused(t, c.as(t, "", at, "job list"), "no token", "needs an API token")
			refused(t, c.as(t, devA+"x", at, "job list"), "bad token", "not an Eddy API token")
		})
	}

	// Revoked through the leader, refused at once through a follower.
	id := regexp.MustCompile(`^eddy_([0-9a-f]{16})_`).FindStringSubmatch(devA)[1]
	if r := c.as(t, devA, follower, "whoami"); r.code != 0 || !strings.Contains(r.stdout, "developer of tenant acme") {
		t.Fatalf("whoami: %s%s", r.stdout, r.stderr)
	}
	admin("token revoke", id)
	refused(t, c.as(t, devA, follower, "job list"), "revoked token", "revoked")

	// Who did what is in the audit log.
	audit := admin("audit list", "--limit", "1000").stdout
	for _, want := range []string{"CreateTenant", "SubmitJob", "RevokeToken", "PermissionDenied"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("audit log lacks %s:\n%s", want, audit)
		}
	}
	c.as(t, testToken, leader, "job cancel", jobB, "--tenant", "beta")

	// No process writes a token's secret to its log.
	for _, p := range append(append([]*proc{}, c.coords...), c.workers...) {
		data, _ := os.ReadFile(p.log)
		for _, tok := range []string{testToken, devA, viewA, devB} {
			if bytes.Contains(data, []byte(tok[len(tok)-64:])) {
				t.Fatalf("%s's log holds a token secret", p.name)
			}
		}
	}
}

// TestStandaloneSetUp: the two commands of the quick start, with no token
// set anywhere: the standalone writes its admin token (mode 0600) and
// saves the CLI context "local", which the next command uses.
func TestStandaloneSetUp(t *testing.T) {
	dir := t.TempDir()
	env := []string{"EDDY_TOKEN=", "EDDY_BOOTSTRAP_TOKEN=", "EDDY_CLI_CONTEXT=local", "EDDY_CONFIG=" + filepath.Join(dir, "config.yaml")}
	p := startProcEnv(t, dir, "standalone", env, "standalone", "--api", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	api := p.addr(t, standaloneLine)
	tokenFile := filepath.Join(dir, "data", "admin.token")
	testkit.Eventually(t, 30*time.Second, "the CLI context", func() bool {
		b, _ := os.ReadFile(p.log)
		return bytes.Contains(b, []byte("CLI context local"))
	})
	st, err := os.Stat(tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v, mode %v", err, st.Mode())
	}
	cli := func(args ...string) result { return eddyEnv(t, env, args...) }
	if r := cli("whoami"); r.code != 0 || !strings.Contains(r.stdout, "admin of tenant default") {
		t.Fatalf("whoami through the saved context: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli("context", "list"); !strings.Contains(r.stdout, "*") || !strings.Contains(r.stdout, "file "+tokenFile) {
		t.Fatalf("context list: %s%s", r.stdout, r.stderr)
	}
	// A second context holding a viewer token read from stdin.
	viewer := strings.TrimSpace(cli("token", "create", "--role", "viewer").stdout)
	set := exec.Command(eddyBin, "context", "set", "ro", "--coordinator", api, "--token-stdin")
	set.Env = append(os.Environ(), env...)
	set.Stdin = strings.NewReader(viewer + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("context set: %v %s", err, out)
	}
	if r := cli("whoami", "--context", "ro"); r.code != 0 || !strings.Contains(r.stdout, "viewer of tenant default") {
		t.Fatalf("whoami --context ro: %s%s", r.stdout, r.stderr)
	}
	if r := cli("context", "list"); strings.Contains(r.stdout, viewer[len(viewer)-64:]) {
		t.Fatal("context list shows a secret")
	}
	refused(t, cli("whoami", "--context", "nope"), "unknown context", `no CLI context "nope"`)
	if r := cli("context", "use", "ro"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	refused(t, cli("tenant", "create", "x"), "viewer as current context", "needs the admin role")
	b, _ := os.ReadFile(p.log)
	if tok, _ := os.ReadFile(tokenFile); bytes.Contains(b, bytes.TrimSpace(tok)) {
		t.Fatal("the standalone logs its admin token")
	}
}
