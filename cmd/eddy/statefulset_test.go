package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

func TestDeriveStatefulIdentity(t *testing.T) {
	const svc = "eddy-coordinator-headless.prod.svc.cluster.local"
	tests := []struct {
		name, host string
		port       int
		want       statefulIdentity
		err        string
	}{
		{"ordinal 0 bootstraps", "eddy-coordinator-0", 7700,
			statefulIdentity{ID: "c0", Bootstrap: true, Advertise: "eddy-coordinator-0." + svc + ":7700"}, ""},
		{"others join ordinal 0", "eddy-coordinator-2", 7700,
			statefulIdentity{ID: "c2", Join: "eddy-coordinator-0." + svc + ":7700", Advertise: "eddy-coordinator-2." + svc + ":7700"}, ""},
		{"two digits", "eddy-coordinator-12", 9000,
			statefulIdentity{ID: "c12", Join: "eddy-coordinator-0." + svc + ":9000", Advertise: "eddy-coordinator-12." + svc + ":9000"}, ""},
		{"no ordinal", "eddy", 7700, statefulIdentity{}, "is not a StatefulSet pod's"},
		{"trailing dash", "eddy-", 7700, statefulIdentity{}, "is not a StatefulSet pod's"},
		{"not a number", "eddy-coordinator-x", 7700, statefulIdentity{}, "does not end in a pod ordinal"},
		{"leading zero", "eddy-01", 7700, statefulIdentity{}, "does not end in a pod ordinal"},
		{"port 0", "eddy-1", 0, statefulIdentity{}, "fixed --api port"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deriveStatefulIdentity(tc.host, svc, tc.port)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := deriveStatefulIdentity("eddy-1", "bad:name", 7700); err == nil {
		t.Error("a service with a port accepted")
	}
}

func TestResolveRaftAdvertise(t *testing.T) {
	lookup := func(ips ...string) func(context.Context, string) ([]net.IP, error) {
		return func(_ context.Context, host string) ([]net.IP, error) {
			if host != "eddy-coordinator-1" {
				return nil, errors.New("unknown host " + host)
			}
			var out []net.IP
			for _, s := range ips {
				out = append(out, net.ParseIP(s))
			}
			return out, nil
		}
	}
	tests := []struct {
		name, addr string
		lookup     func(context.Context, string) ([]net.IP, error)
		want, err  string
	}{
		{"an IP as is", "10.0.0.7:7701", nil, "10.0.0.7:7701", ""},
		{"a name, its IPv4 first", "eddy-coordinator-1:7701", lookup("fd00::1", "10.96.3.4"), "10.96.3.4:7701", ""},
		{"IPv6 only", "eddy-coordinator-1:7701", lookup("fd00::1"), "[fd00::1]:7701", ""},
		{"no port", "eddy-coordinator-1", nil, "", "want HOST:PORT"},
		{"port 0", "eddy-coordinator-1:0", nil, "", "want HOST:PORT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveRaftAdvertise(context.Background(), tc.addr, tc.lookup)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("gives up with the context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := resolveRaftAdvertise(ctx, "nowhere:7701", lookup())
		if err == nil || !strings.Contains(err.Error(), "resolve nowhere") {
			t.Fatalf("err %v", err)
		}
	})
}

// TestStatefulSetFlagClash: the flags --statefulset-service derives are
// refused alongside it, in one line, before anything starts.
func TestStatefulSetFlagClash(t *testing.T) {
	r := eddy(t, "coordinator", "--statefulset-service", "eddy-coordinator-headless", "--id", "c9", "--join", "x:1",
		"--data-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "--statefulset-service sets --id, --join itself") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// startAsPod starts `eddy args…` with the host name a StatefulSet would
// give the pod, in a UTS namespace of its own (root only: skipped
// otherwise). unshare and sh exec eddy, so the process is eddy's.
func startAsPod(t *testing.T, dir, hostname string, args ...string) *exec.Cmd {
	t.Helper()
	if out, err := exec.Command("unshare", "--uts", "sh", "-c", "hostname x").CombinedOutput(); err != nil {
		t.Skipf("cannot set a host name in a UTS namespace here: %v %s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, hostname+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", append([]string{"--uts", "sh", "-c", `hostname "$0" && exec "$@"`, hostname, eddyBin}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log.Close()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("---- %s ----\n%s", hostname, tail(string(b), 3000))
		}
	})
	return cmd
}

// TestStatefulSetPods runs coordinators as pods eddy-coordinator-0 and -1
// would: ordinal 0 bootstraps as c0, advertised under its headless name,
// its Raft address the IP its --raft-advertise name resolves to; ordinal 1
// joins through ordinal 0's headless name (which does not resolve here,
// so the join fails, naming it).
func TestStatefulSetPods(t *testing.T) {
	dir := t.TempDir()
	const svc = "eddy-coordinator-headless"
	api := freeAddr(t)
	_, apiPort, _ := net.SplitHostPort(api)
	_, raftPort, _ := net.SplitHostPort(freeAddr(t))
	startAsPod(t, dir, "eddy-coordinator-0", "coordinator", "--statefulset-service", svc, "--api", api,
		"--raft", "0.0.0.0:"+raftPort, "--raft-advertise", "localhost:"+raftPort, "--insecure",
		"--data-dir", filepath.Join(dir, "c0"))
	want := "coordinator c0 serving on eddy-coordinator-0." + svc + ":" + apiPort + " (raft 127.0.0.1:" + raftPort + ")"
	testkit.Eventually(t, 30*time.Second, "eddy-coordinator-0 serving", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "eddy-coordinator-0.log"))
		return strings.Contains(string(b), want)
	})
	testkit.Eventually(t, 30*time.Second, "c0 leading", func() bool {
		r := eddy(t, "cluster", "info", "--coordinator", api)
		return regexp.MustCompile(`(?m)^c0\s+LEADER\s+eddy-coordinator-0\.` + svc + `:` + apiPort + `\s+127\.0\.0\.1:` + raftPort).MatchString(r.stdout)
	})

	member1 := startAsPod(t, dir, "eddy-coordinator-1", "coordinator", "--statefulset-service", svc, "--api", "127.0.0.2:"+apiPort, // the same port, as in a pod of its own
		"--raft", freeAddr(t), "--join-timeout", "1s", "--data-dir", filepath.Join(dir, "c1"))
	err := member1.Wait()
	b, _ := os.ReadFile(filepath.Join(dir, "eddy-coordinator-1.log"))
	if err == nil || !strings.Contains(string(b), "coordinator c1: start: join through eddy-coordinator-0."+svc+":"+apiPort) {
		t.Fatalf("ordinal 1: exit %v, want a failed join through ordinal 0's headless name:\n%s", err, b)
	}
}
