package certgen_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/internal/certgen"
)

func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	paths, err := certgen.Init(dir, []string{"10.0.0.7", "eddy.internal"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if strings.HasSuffix(p, "-key.pem") {
			want = 0o600
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, certgen.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem: no certificate")
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certgen.NodeFile), filepath.Join(dir, certgen.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		eku  x509.ExtKeyUsage
		ok   bool
	}{
		{"10.0.0.7", x509.ExtKeyUsageServerAuth, true},
		{"eddy.internal", x509.ExtKeyUsageServerAuth, true},
		{"10.0.0.7", x509.ExtKeyUsageClientAuth, true},
		{"127.0.0.1", x509.ExtKeyUsageServerAuth, false}, // not among the hosts given
	} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.eku}})
		if (err == nil) != tc.ok {
			t.Errorf("%s %v: %v, want ok %v", tc.host, tc.eku, err, tc.ok)
		}
	}

	// Again: refused, and the CA is unchanged; with force: replaced.
	if _, err := certgen.Init(dir, nil, false); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("second Init: %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, certgen.CAFile)); string(again) != string(caPEM) {
		t.Error("the CA changed after a refused Init")
	}
	if _, err := certgen.Init(dir, nil, true); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, certgen.CAFile)); string(again) == string(caPEM) {
		t.Error("Init with force kept the old CA")
	}
}
