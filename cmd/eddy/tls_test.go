package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/internal/testkit"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

var (
	raftLine   = regexp.MustCompile(`(?m)^coordinator \S+ serving on \S+ \(raft (\S+)\)\n`)
	workerLine = regexp.MustCompile(`(?m)^worker \S+ with \d+ slots, data exchange on (\S+)\n`)
)

// tlsPeer dials addr with TLS, trusting roots and presenting cert (none
// if nil), and reads one byte: a server that refuses the client's
// certificate answers with a TLS alert, which TLS 1.3 delivers at the
// first read rather than in the client's handshake. A gRPC server that
// accepts sends its HTTP/2 settings, so the read returns a byte.
func tlsPeer(addr string, roots *x509.CertPool, cert *tls.Certificate) error {
	// h2: a gRPC server closes a connection that does not offer it.
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

func loadPool(t testing.TB, path string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatalf("%s: no certificate", path)
	}
	return p
}

// refusedByServer fails the test unless err is a TLS alert from the
// server (not a timeout, not a refusal by the client itself).
func refusedByServer(t testing.TB, what string, err error) {
	t.Helper()
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() || !strings.Contains(err.Error(), "remote error: tls:") {
		t.Errorf("%s: got %v, want the server's TLS alert", what, err)
	}
}

// TestTLSCluster runs a cluster with certificates from `eddy certs init`
// (two coordinators, two workers, all with mutual TLS) through the CLI
// with --ca, runs a keyed job across both workers (so its records cross
// the Exchange over TLS) and compares its output with `eddy run`'s; and
// checks that members without the cluster's certificate are kept out:
// a plaintext worker and one with another CA's certificate never
// register (their logs say why), a caller with no client certificate is
// refused the Cluster service and Join, a coordinator with another CA's
// certificate cannot join, and the Raft and Exchange ports refuse a TLS
// peer without a certificate of the cluster CA.
func TestTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes")
	}
	module := filepath.Join(repoRoot(t), "udfs/build/counter-c.wasm")
	refSpec, refOut := clusterSpec(t, 0, module)
	if r := eddy(t, "run", refSpec); r.code != 0 {
		t.Fatalf("eddy run: %s", r.stderr)
	}

	dir := t.TempDir()
	certs, other := filepath.Join(dir, "certs"), filepath.Join(dir, "other")
	for _, d := range []string{certs, other} {
		if r := eddy(t, "certs", "init", d); r.code != 0 {
			t.Fatalf("certs init: %s", r.stderr)
		}
	}
	if r := eddy(t, "certs", "init", certs); r.code != 1 || !strings.Contains(r.stderr, "refusing to overwrite") {
		t.Fatalf("certs init again: %d %s", r.code, r.stderr)
	}
	ca := filepath.Join(certs, "ca.pem")
	hb := []string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "5s"}
	coord := func(name string, certDir string, extra ...string) *proc {
		args := append([]string{"coordinator", "--id", name, "--api", "127.0.0.1:0", "--raft", "127.0.0.1:0",
			"--data-dir", filepath.Join(dir, name), "--blobs", filepath.Join(dir, "blobs"), "--certs", certDir}, hb...)
		// No token: a member joins by its certificate alone.
		return startProcEnv(t, dir, name, []string{"EDDY_TOKEN="}, append(args, extra...)...)
	}
	c1 := coord("c1", certs, "--bootstrap")
	api := c1.addr(t, coordinatorLine)
	raftAddr := c1.addr(t, raftLine)
	cli := func(args ...string) result {
		return eddy(t, append(args, "--coordinator", api, "--ca", ca, "--timeout", "10s")...)
	}
	testkit.Eventually(t, 20*time.Second, "c1 leads", func() bool {
		return strings.Contains(cli("cluster", "info").stdout, "LEADER")
	})
	c2 := coord("c2", certs, "--join", api)
	c2.addr(t, coordinatorLine)
	testkit.Eventually(t, 30*time.Second, "c2 follows", func() bool {
		return strings.Contains(cli("cluster", "info").stdout, "FOLLOWER")
	})

	workers := map[string][]string{
		"w1":       {"--certs", certs},
		"w2":       {"--certs", certs},
		"wplain":   nil,
		"wforeign": {"--certs", other},
	}
	procs := map[string]*proc{}
	for name, extra := range workers {
		args := append([]string{"worker", "--id", name, "--coordinator", api, "--slots", "16", "--data-dir", filepath.Join(dir, name)}, extra...)
		procs[name] = startProc(t, dir, name, args...)
	}
	dataAddr := procs["w1"].addr(t, workerLine)
	testkit.Eventually(t, 30*time.Second, "two workers alive", func() bool {
		return strings.Count(cli("cluster", "info").stdout, "ALIVE") == 2
	})

	t.Run("outsiders kept out", func(t *testing.T) {
		for name, want := range map[string]string{
			"wplain":   "this worker has no TLS",
			"wforeign": "certificate signed by unknown authority",
		} {
			testkit.Eventually(t, 20*time.Second, name+" says why it cannot register", func() bool {
				b, _ := os.ReadFile(procs[name].log)
				return strings.Contains(string(b), want)
			})
		}
		if out := cli("cluster", "info").stdout; strings.Contains(out, "wplain") || strings.Contains(out, "wforeign") {
			t.Errorf("a worker without the cluster's certificate registered:\n%s", out)
		}

		// A client that trusts the CA but presents no certificate: the
		// API admits it (CLI users are such clients), not as a member.
		creds, err := rpc.TLS{CA: ca}.Load(false)
		if err != nil {
			t.Fatal(err)
		}
		// An admin's token, but no client certificate: the client API
		// answers, the members' methods do not.
		conn, err := grpc.NewClient(api, append(creds.DialOptions(), rpc.WithToken(testToken))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = eddyv1.NewClusterClient(conn).RegisterWorker(ctx, &eddyv1.RegisterWorkerRequest{WorkerId: "intruder", InstanceId: "x", DataAddress: "127.0.0.1:1", Slots: 4})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "cluster CA") {
			t.Errorf("RegisterWorker without a client certificate: %v, want UNAUTHENTICATED", err)
		}
		_, err = eddyv1.NewControlClient(conn).Join(ctx, &eddyv1.JoinRequest{NodeId: "intruder", RaftAddress: "127.0.0.1:1", ApiAddress: "127.0.0.1:2"})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("Join without a client certificate: %v, want UNAUTHENTICATED", err)
		}
		if _, err := eddyv1.NewControlClient(conn).ClusterInfo(ctx, &eddyv1.ClusterInfoRequest{}); err != nil {
			t.Errorf("ClusterInfo without a client certificate: %v", err)
		}

		// A coordinator of another CA cannot join the group.
		c3 := coord("c3", other, "--join", api, "--join-timeout", "3s")
		err = c3.cmd.Wait()
		b, _ := os.ReadFile(c3.log)
		if err == nil || !strings.Contains(string(b), "certificate signed by unknown authority") {
			t.Errorf("foreign coordinator: exit %v, log:\n%s", err, b)
		}
		if out := cli("cluster", "info").stdout; strings.Contains(out, "c3") {
			t.Errorf("foreign coordinator in the group:\n%s", out)
		}

		// The Raft and Exchange ports refuse a peer with a certificate of
		// another CA, or none; the Exchange admits a member.
		roots := loadPool(t, ca)
		foreign, err := tls.LoadX509KeyPair(filepath.Join(other, "node.pem"), filepath.Join(other, "node-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		member, err := tls.LoadX509KeyPair(filepath.Join(certs, "node.pem"), filepath.Join(certs, "node-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		refusedByServer(t, "raft, foreign certificate", tlsPeer(raftAddr, roots, &foreign))
		refusedByServer(t, "raft, no certificate", tlsPeer(raftAddr, roots, nil))
		refusedByServer(t, "exchange, foreign certificate", tlsPeer(dataAddr, roots, &foreign))
		refusedByServer(t, "exchange, no certificate", tlsPeer(dataAddr, roots, nil))
		if err := tlsPeer(dataAddr, roots, &member); err != nil {
			t.Errorf("exchange, member certificate: %v", err)
		}
	})

	t.Run("CLI", func(t *testing.T) {
		r := eddy(t, "cluster", "info", "--coordinator", api, "--timeout", "5s")
		if r.code != 1 || !strings.Contains(r.stderr, "pass --ca FILE") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("without --ca: %d %q, want one line saying to pass --ca", r.code, r.stderr)
		}
		r = eddy(t, "cluster", "info", "--coordinator", api, "--timeout", "5s", "--ca", filepath.Join(other, "ca.pem"))
		if r.code != 1 || !strings.Contains(r.stderr, "certificate signed by unknown authority") {
			t.Errorf("with another CA: %d %s", r.code, r.stderr)
		}
		r = eddy(t, "cluster", "info", "--coordinator", api, "--ca", filepath.Join(dir, "missing.pem"))
		if r.code != 2 || !strings.Contains(r.stderr, "missing.pem") {
			t.Errorf("with a missing CA file: %d %s", r.code, r.stderr)
		}
	})

	t.Run("job", func(t *testing.T) {
		if r := cli("module", "upload", module, "--name", "counter"); r.code != 0 {
			t.Fatalf("upload: %s", r.stderr)
		}
		spec, out := clusterSpec(t, 0, "counter")
		r := cli("job", "submit", spec)
		if r.code != 0 {
			t.Fatalf("submit: %s", r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		testkit.Eventually(t, time.Minute, "job finished", func() bool {
			st := cli("job", "status", id).stdout
			if strings.Contains(st, "FAILED") {
				t.Fatalf("job failed:\n%s", st)
			}
			return strings.Contains(st, "FINISHED")
		})
		sameOutput(t, out, refOut)
		st := cli("job", "status", id).stdout
		if !strings.Contains(st, " w1 ") || !strings.Contains(st, " w2 ") {
			t.Errorf("tasks not spread over both workers (no Exchange traffic):\n%s", st)
		}
		if strings.Contains(st, "wplain") || strings.Contains(st, "wforeign") {
			t.Errorf("tasks deployed to a worker without the cluster's certificate:\n%s", st)
		}
	})
}

// TestListenBeyondLoopback: a server refuses to listen on an address
// other than loopback in plaintext, with one line, unless --insecure or
// TLS.
func TestListenBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"coordinator api", []string{"coordinator", "--api", "0.0.0.0:0", "--raft", "127.0.0.1:0", "--bootstrap"}, "--api 0.0.0.0:0: refusing to listen beyond loopback without TLS"},
		{"coordinator every interface", []string{"coordinator", "--api", ":0", "--raft", "127.0.0.1:0", "--bootstrap"}, "--api :0: refusing"},
		{"worker data", []string{"worker", "--data", "0.0.0.0:0"}, "--data 0.0.0.0:0: refusing"},
		{"standalone", []string{"standalone", "--api", "0.0.0.0:0"}, "--api 0.0.0.0:0: refusing"},
		{"half a key pair", []string{"worker", "--tls-cert", "x.pem"}, "a certificate and its key go together"},
		{"no CA", []string{"worker", "--tls-cert", "x.pem", "--tls-key", "y.pem"}, "needs the cluster CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := eddy(t, append(tc.args, "--data-dir", filepath.Join(dir, "refused"))...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", r.code, r.stderr, tc.want)
			}
		})
	}
	certs := filepath.Join(dir, "certs")
	if r := eddy(t, "certs", "init", certs); r.code != 0 {
		t.Fatal(r.stderr)
	}
	for name, extra := range map[string][]string{"insecure": {"--insecure"}, "tls": {"--certs", certs}} {
		t.Run(name, func(t *testing.T) {
			args := []string{"coordinator", "--api", "0.0.0.0:0", "--raft", "127.0.0.1:0", "--bootstrap", "--data-dir", filepath.Join(dir, name)}
			p := startProc(t, dir, name, append(args, extra...)...)
			p.addr(t, coordinatorLine)
		})
	}
}
