package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
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
