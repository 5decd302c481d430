package rpc_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/internal/certgen"
	"github.com/eddy-stream/eddy/proto/rpc"
)

// certDirs makes two independent CAs with their member certificates.
func certDirs(t *testing.T) (cluster, other string) {
	t.Helper()
	cluster, other = filepath.Join(t.TempDir(), "cluster"), filepath.Join(t.TempDir(), "other")
	for _, d := range []string{cluster, other} {
		if _, err := certgen.Init(d, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	return cluster, other
}

func member(dir string) rpc.TLS {
	return rpc.TLS{CA: filepath.Join(dir, certgen.CAFile), Cert: filepath.Join(dir, certgen.NodeFile), Key: filepath.Join(dir, certgen.NodeKeyFile)}
}

func TestTLSLoad(t *testing.T) {
	cluster, other := certDirs(t)
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mismatched := member(cluster)
	mismatched.Key = filepath.Join(other, certgen.NodeKeyFile)
	missingCA := member(cluster)
	missingCA.CA = filepath.Join(cluster, "nope.pem")
	missingCert := member(cluster)
	missingCert.Cert = filepath.Join(cluster, "nope.pem")
	junkCA := member(cluster)
	junkCA.CA = junk
	for _, tc := range []struct {
		name    string
		tls     rpc.TLS
		member  bool
		want    string // "" for success
		plain   bool   // nil credentials
		wantErr bool
	}{
		{name: "none", plain: true},
		{name: "member", tls: member(cluster), member: true},
		{name: "client with a CA only", tls: rpc.TLS{CA: filepath.Join(cluster, certgen.CAFile)}},
		{name: "member with a CA only", tls: rpc.TLS{CA: filepath.Join(cluster, certgen.CAFile)}, member: true, want: "needs the cluster CA, its certificate and its key"},
		{name: "member without CA", tls: rpc.TLS{Cert: member(cluster).Cert, Key: member(cluster).Key}, member: true, want: "needs the cluster CA"},
		{name: "certificate without key", tls: rpc.TLS{CA: member(cluster).CA, Cert: member(cluster).Cert}, want: "go together"},
		{name: "key of another certificate", tls: mismatched, member: true, want: "private key does not match public key"},
		{name: "missing CA file", tls: missingCA, member: true, want: "nope.pem: no such file"},
		{name: "missing certificate file", tls: missingCert, member: true, want: "nope.pem: no such file"},
		{name: "CA not PEM", tls: junkCA, member: true, want: "junk.pem: no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds, err := tc.tls.Load(tc.member)
			if verr := tc.tls.Validate(tc.member); (verr == nil) != (err == nil) {
				t.Errorf("Validate %v, Load %v", verr, err)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if (creds == nil) != tc.plain {
					t.Errorf("credentials %v, want nil: %v", creds, tc.plain)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, rpc.ErrInvalidTLS) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want one line with %q matching ErrInvalidTLS", err, tc.want)
			}
		})
	}
}

// serveTLS starts a gRPC server on 127.0.0.1 with creds, whose health
// service is for members only, and returns its address.
func serveTLS(t *testing.T, creds *rpc.Credentials, auth rpc.ClientAuth) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(creds.ServerOptions(auth), creds.MemberOnly(func(m string) bool {
		return strings.HasPrefix(m, "/grpc.health.v1.Health/")
	})...)
	s := grpc.NewServer(opts...)
	rpc.RegisterStandard(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// check calls Health.Check (unary) and reads the first answer of
// Health.Watch (a stream) at addr, dialled with creds.
func check(t *testing.T, addr string, creds *rpc.Credentials) (unary, stream error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, creds.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := healthpb.NewHealthClient(conn)
	_, unary = hc.Check(ctx, &healthpb.HealthCheckRequest{})
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	return unary, err
}

func load(t *testing.T, tl rpc.TLS, member bool) *rpc.Credentials {
	t.Helper()
	c, err := tl.Load(member)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMemberOnly: a server that verifies client certificates if given
// admits a member to member-only methods, refuses a client without a
// certificate with UNAUTHENTICATED (unary and stream), and a client with
// another CA's certificate at the handshake. A server that requires a
// member refuses a client without a certificate at the handshake.
func TestMemberOnly(t *testing.T) {
	cluster, other := certDirs(t)
	srv := load(t, member(cluster), true)
	memberCreds := load(t, member(cluster), true)
	caOnly := load(t, rpc.TLS{CA: member(cluster).CA}, false)
	// Trusts the server, but presents a certificate of another CA.
	foreign := load(t, rpc.TLS{CA: member(cluster).CA, Cert: member(other).Cert, Key: member(other).Key}, false)

	addr := serveTLS(t, srv, rpc.VerifyIfGiven)
	if u, s := check(t, addr, memberCreds); u != nil || s != nil {
		t.Errorf("member: %v, %v", u, s)
	}
	u, s := check(t, addr, caOnly)
	for _, err := range []error{u, s} {
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "cluster CA") {
			t.Errorf("no client certificate: %v, want UNAUTHENTICATED", err)
		}
	}
	if u, _ := check(t, addr, foreign); status.Code(u) != codes.Unavailable {
		t.Errorf("another CA's client certificate: %v, want the handshake refused", u)
	}
	if u, _ := check(t, addr, nil); status.Code(u) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want the connection refused", u)
	}

	strict := serveTLS(t, srv, rpc.RequireMember)
	if u, _ := check(t, strict, caOnly); status.Code(u) != codes.Unavailable {
		t.Errorf("RequireMember, no client certificate: %v, want the handshake refused", u)
	}
	if u, s := check(t, strict, memberCreds); u != nil || s != nil {
		t.Errorf("RequireMember, member: %v, %v", u, s)
	}

	// Plaintext: nothing to check, every caller is admitted.
	if u, s := check(t, serveTLS(t, nil, rpc.VerifyIfGiven), nil); u != nil || s != nil {
		t.Errorf("plaintext: %v, %v", u, s)
	}
}

func TestCheckListen(t *testing.T) {
	cluster, _ := certDirs(t)
	creds := load(t, member(cluster), true)
	for _, tc := range []struct {
		addr     string
		creds    *rpc.Credentials
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:7700", nil, false, true},
		{"[::1]:7700", nil, false, true},
		{"localhost:7700", nil, false, true},
		{"127.0.0.2:0", nil, false, true},
		{"0.0.0.0:7700", nil, false, false},
		{":7700", nil, false, false},
		{"10.1.2.3:7700", nil, false, false},
		{"example.com:7700", nil, false, false},
		{"0.0.0.0:7700", nil, true, true},
		{"0.0.0.0:7700", creds, false, true},
	} {
		err := tc.creds.CheckListen("--api", tc.addr, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("%s (TLS %v, insecure %v): %v, want ok %v", tc.addr, tc.creds != nil, tc.insecure, err, tc.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "--api "+tc.addr+": refusing") {
			t.Errorf("%s: %v", tc.addr, err)
		}
	}
}
