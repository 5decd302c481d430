// Package certgen makes the certificates of a local Eddy cluster, for
// `eddy certs init` and for tests: a certificate authority and one
// certificate that every cluster member (coordinator or worker) presents
// both as a server and as a client, all ECDSA P-256, with crypto/x509
// only.
//
// It is for local use and tests, not a PKI: there is no revocation,
// rotation or per-member identity. An operator with a PKI of their own
// brings its files instead (--tls-ca, --tls-cert, --tls-key).
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/eddy-stream/eddy/internal/atomicfile"
)

// The files Init writes in its directory.
const (
	CAFile      = "ca.pem"
	CAKeyFile   = "ca-key.pem"
	NodeFile    = "node.pem"
	NodeKeyFile = "node-key.pem"
)

// DefaultHosts are the names and addresses the node certificate is valid
// for when none are given: this machine's loopback.
var DefaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// Validity of the certificates made.
const validity = 2 * 365 * 24 * time.Hour

// Init writes a new CA and a node certificate signed by it, valid for
// hosts (IP addresses and DNS names), into dir (created if needed). Keys
// are written with mode 0600. Unless force, it refuses to overwrite any
// of the files, so that running it twice does not replace the CA a
// cluster trusts. It returns the paths written.
func Init(dir string, hosts []string, force bool) ([]string, error) {
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	names := []string{CAFile, CAKeyFile, NodeFile, NodeKeyFile}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
		if _, err := os.Stat(paths[i]); err == nil && !force {
			return nil, fmt.Errorf("certs: %s exists; refusing to overwrite it (--force replaces every file, and members with the old CA then no longer trust the new ones)", paths[i])
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	now := time.Now().Add(-time.Minute) // tolerate small clock skew
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Eddy"}, CommonName: "Eddy cluster CA"},
		NotBefore:             now,
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	nodeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	nodeTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Eddy"}, CommonName: "eddy-node"},
		NotBefore:    now,
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Members both serve and dial each other.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			nodeTmpl.IPAddresses = append(nodeTmpl.IPAddresses, ip)
		} else if h != "" {
			nodeTmpl.DNSNames = append(nodeTmpl.DNSNames, h)
		}
	}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, ca, &nodeKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: node certificate: %w", err)
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	nodeKeyDER, err := x509.MarshalECPrivateKey(nodeKey)
	if err != nil {
		return nil, err
	}
	blocks := []*pem.Block{
		{Type: "CERTIFICATE", Bytes: caDER},
		{Type: "EC PRIVATE KEY", Bytes: caKeyDER},
		{Type: "CERTIFICATE", Bytes: nodeDER},
		{Type: "EC PRIVATE KEY", Bytes: nodeKeyDER},
	}
	for i, b := range blocks {
		mode := os.FileMode(0o644)
		if b.Type != "CERTIFICATE" {
			mode = 0o600
		}
		if err := atomicfile.Write(paths[i], pem.EncodeToMemory(b), mode); err != nil {
			return nil, fmt.Errorf("certs: %w", err)
		}
	}
	return paths, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
