// Package dashboardtest runs the dashboard's browser test
// (dashboard/test/e2e.mjs: playwright-core driving Debian's Chromium)
// from Go tests. It is for tests only.
//
// Without node, chromium or dashboard/node_modules a test skips with the
// reason, except under CI (the CI variable set), where it fails: CI
// installs them (.ci/run), so their absence there is a broken setup, not
// a reason to pass.
package dashboardtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Chromium is Debian's browser, which the tests drive.
const Chromium = "/usr/bin/chromium"

// Options say what the page must show.
type Options struct {
	// URL of the dashboard (the coordinator's --http address).
	URL string
	// Token logs in; BadToken must be refused at the login. Empty Token:
	// the cluster has no authentication and there is no login.
	Token, BadToken string
	// OtherToken, when set, is another tenant's: it must see neither the
	// job in the list nor its page.
	OtherToken string
	// ClusterRefused: the token may not read the cluster (a tenant's), so
	// the cluster page must show the refusal; otherwise it must show the
	// leader.
	ClusterRefused bool
	// Job must be listed, with Nodes in its graph.
	Job   string
	Nodes []string
	// AdminToken, when set, revokes the page's token at the end: the open
	// page must fall back to the login with the refusal.
	AdminToken string
	// SwapNode and SwapModule ("name@version"), when set: a hot swap made
	// with the page's form, which must end SWAPPED.
	SwapNode, SwapModule string
	// Tenant is the job's tenant for an admin token, which picks it in the
	// jobs page's selector; empty for a tenant's token.
	Tenant string
	// Steps limits the script to these steps (see e2e.mjs; nil: all).
	Steps []string
	// Timeout bounds each wait in the browser (0: 60 s).
	Timeout time.Duration
}

// Dir is dashboard/: the folder of that name in the module's root, the
// nearest folder above the test's working directory that holds go.mod.
// The source path runtime.Caller reports is no help: the Makefile builds
// with -trimpath, which makes it the import path.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "dashboard")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("dashboardtest: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Require skips (or, under CI, fails) when the browser test cannot run.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (apt-get install -y nodejs)")
	}
	if _, err := os.Stat(Chromium); err != nil {
		missing = append(missing, Chromium+" (apt-get install -y chromium)")
	}
	if _, err := os.Stat(filepath.Join(Dir(t), "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "dashboard/node_modules (cd dashboard && npm ci)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "browser test needs " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " — CI installs them (.ci/run)")
	}
	t.Skip(msg)
}

// ArtifactsDir is where the screenshots of t go: under
// $EDDY_DASHBOARD_ARTIFACTS when set (kept after the test), else under the
// test's temporary directory.
func ArtifactsDir(t testing.TB) string {
	base := os.Getenv("EDDY_DASHBOARD_ARTIFACTS")
	if base == "" {
		return filepath.Join(t.TempDir(), "screenshots")
	}
	abs, err := filepath.Abs(base)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(abs, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
}

// Run runs e2e.mjs with o and fails t with its failing step. It calls
// Require first.
func Run(t testing.TB, o Options) {
	t.Helper()
	Require(t)
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	art := ArtifactsDir(t)
	// The script has nine steps bounded by o.Timeout each, and the browser's
	// start: a whole bound keeps a hung browser from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 12*o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(Dir(t), "test", "e2e.mjs"))
	cmd.Dir = Dir(t)
	cmd.Env = append(os.Environ(),
		"EDDY_URL="+o.URL, "EDDY_TOKEN="+o.Token, "EDDY_BAD_TOKEN="+o.BadToken,
		"EDDY_OTHER_TOKEN="+o.OtherToken, "EDDY_CLUSTER="+map[bool]string{true: "refused", false: "leader"}[o.ClusterRefused],
		"EDDY_ADMIN_TOKEN="+o.AdminToken, "EDDY_SWAP_NODE="+o.SwapNode, "EDDY_SWAP_MODULE="+o.SwapModule,
		"EDDY_TENANT="+o.Tenant, "EDDY_STEPS="+strings.Join(o.Steps, ","),
		"EDDY_JOB="+o.Job, "EDDY_NODES="+strings.Join(o.Nodes, ","),
		"EDDY_ARTIFACTS="+art, "EDDY_TIMEOUT_MS="+strconv.FormatInt(o.Timeout.Milliseconds(), 10), "CHROMIUM="+Chromium)
	out, err := cmd.CombinedOutput()
	t.Logf("browser test (screenshots in %s):\n%s", art, out)
	if err != nil {
		t.Fatalf("browser test: %v", err)
	}
}
