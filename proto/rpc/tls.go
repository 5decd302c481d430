package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// ErrInvalidTLS is matched by the errors of TLS.Validate and TLS.Load.
var ErrInvalidTLS = errors.New("rpc: invalid TLS configuration")

// TLS names the files of a process's transport security, as flags fill
// it. The zero value is plaintext.
//
// Cluster members (coordinators, workers) set all three: CA is the
// cluster's certificate authority, against which every member verifies
// its peers (mutual TLS), and Cert/Key the member's own certificate,
// which it presents both as a server and as a client. A client of the
// Control API (the CLI) sets CA only: it verifies the coordinator and
// presents no certificate (it authenticates with a token).
type TLS struct {
	CA, Cert, Key string
	// Insecure allows plaintext on addresses other than loopback
	// (CheckListen).
	Insecure bool
}

// Enabled reports whether any TLS file is named.
func (t TLS) Enabled() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

// Validate checks that the files named exist, parse, and that the key is
// the certificate's; a cluster member (member true) needs all three.
func (t TLS) Validate(member bool) error {
	_, err := t.Load(member)
	return err
}

// Load reads and checks the files and returns the credentials; nil (and
// no error) when no file is named, which means plaintext.
func (t TLS) Load(member bool) (*Credentials, error) {
	if !t.Enabled() {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidTLS, fmt.Sprintf(format, args...))
	}
	if (t.Cert == "") != (t.Key == "") {
		return nil, bad("a certificate and its key go together (--tls-cert %q, --tls-key %q)", t.Cert, t.Key)
	}
	if member && (t.CA == "" || t.Cert == "") {
		return nil, bad("a cluster member needs the cluster CA, its certificate and its key (--certs DIR, or --tls-ca, --tls-cert and --tls-key)")
	}
	c := &Credentials{}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, bad("CA: %v", err)
		}
		c.roots = x509.NewCertPool()
		if !c.roots.AppendCertsFromPEM(pem) {
			return nil, bad("CA %s: no PEM certificate in it", t.CA)
		}
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, bad("certificate %s with key %s: %v", t.Cert, t.Key, err)
		}
		c.cert = &cert
	}
	return c, nil
}

// Credentials are loaded TLS files. A nil *Credentials means plaintext:
// every method accepts a nil receiver, so callers need no branch.
type Credentials struct {
	roots *x509.CertPool
	cert  *tls.Certificate
}

// ClientAuth says what a server asks of its clients' certificates.
type ClientAuth int

const (
	// RequireMember refuses a connection without a certificate signed by
	// the cluster CA: the Exchange and Raft, which only members reach.
	RequireMember ClientAuth = iota
	// VerifyIfGiven verifies a certificate the client presents but admits
	// clients without one: the coordinator's API, which CLI users reach
	// too. Its member-only methods check with MemberOnly.
	VerifyIfGiven
)

// ServerConfig is the tls.Config of a server; nil for plaintext.
func (c *Credentials) ServerConfig(auth ClientAuth) *tls.Config {
	if c == nil {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientCAs: c.roots}
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	if auth == VerifyIfGiven {
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg
}

// ClientConfig is the tls.Config of a client; nil for plaintext. The
// server name is left empty: the dialer takes it from the address dialled
// (an IP address is matched against the certificate's IP SANs).
func (c *Credentials) ClientConfig() *tls.Config {
	if c == nil {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.roots}
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	return cfg
}

// PeerConfig is one tls.Config for a peer-to-peer protocol where each
// side both dials and accepts (Raft): it presents the certificate and
// requires and verifies the other side's.
func (c *Credentials) PeerConfig() *tls.Config {
	cfg := c.ServerConfig(RequireMember)
	if cfg != nil {
		cfg.RootCAs = c.roots
	}
	return cfg
}

// ServerOptions are ServerOptions() plus the transport credentials.
func (c *Credentials) ServerOptions(auth ClientAuth) []grpc.ServerOption {
	opts := ServerOptions()
	if c != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c.ServerConfig(auth))))
	}
	return opts
}

// DialOptions are DialOptions() with TLS transport credentials instead
// of plaintext ones.
func (c *Credentials) DialOptions() []grpc.DialOption {
	opts := DialOptions()
	if c != nil {
		// A later WithTransportCredentials replaces the plaintext one.
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(c.ClientConfig())))
	}
	return opts
}

// NewPool returns a Pool that dials with c's DialOptions.
func (c *Credentials) NewPool() *Pool {
	p := NewPool()
	p.dial = c.DialOptions
	return p
}

// IsMember reports whether the caller of ctx presented a certificate that
// the server verified against the cluster CA.
func IsMember(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(info.State.VerifiedChains) > 0
}

// MemberOnly returns server options (chained interceptors, so other
// interceptors may be added) that refuse calls of the methods member
// matches (by full name, "/eddy.v1.Cluster/Heartbeat") from callers
// without a verified cluster certificate, with UNAUTHENTICATED. With nil
// credentials (plaintext) they return nothing: there is nothing to check.
func (c *Credentials) MemberOnly(member func(fullMethod string) bool) []grpc.ServerOption {
	if c == nil {
		return nil
	}
	check := func(ctx context.Context, method string) error {
		if member(method) && !IsMember(ctx) {
			return status.Errorf(codes.Unauthenticated, "%s is for cluster members: the caller presented no certificate signed by the cluster CA", method)
		}
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// CheckListen refuses a plaintext listener (c nil) on an address other
// than loopback, unless insecure: what reaches it from the network would
// be neither authenticated nor encrypted. what names the listener in the
// error ("--api").
func (c *Credentials) CheckListen(what, addr string, insecure bool) error {
	if c != nil || insecure || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%s %s: refusing to listen beyond loopback without TLS: give --certs DIR (see eddy certs init), or --insecure to serve plaintext anyway", what, addr)
}

// IsLoopback reports whether addr ("host:port") listens on loopback only:
// a loopback IP or localhost. An empty host (":7700") is every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
