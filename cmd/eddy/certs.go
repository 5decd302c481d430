package main

// Transport security: `eddy certs init`, and the TLS flags of the server
// modes.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/eddy-stream/eddy/internal/certgen"
	"github.com/eddy-stream/eddy/proto/rpc"
)

const certsUsage = `usage:
  eddy certs init [--hosts H1,H2,...] [--force] DIR   write a cluster CA and a member certificate into DIR
`

func cmdCerts(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "init" {
		return usageError{errors.New("certs needs the subcommand init\n" + certsUsage)}
	}
	fs := flag.NewFlagSet("certs init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hosts := fs.String("hosts", strings.Join(certgen.DefaultHosts, ","), "IP addresses and DNS names the member certificate is valid for, comma-separated: every address members and clients dial")
	force := fs.Bool("force", false, "overwrite existing files (members holding the old CA then refuse the new certificates)")
	if err := parseFlags(fs, args[1:], 1, "certs init takes one directory"); err != nil {
		return err
	}
	var hs []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	paths, err := certgen.Init(fs.Arg(0), hs, *force)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\nstart every coordinator and worker with --certs %s; clients use --ca %s\n",
		strings.Join(paths, ", "), fs.Arg(0), filepath.Join(fs.Arg(0), certgen.CAFile))
	return nil
}

// tlsFlags fill an rpc.TLS for a server mode.
type tlsFlags struct {
	tls   rpc.TLS
	certs string
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.certs, "certs", "", "directory written by `eddy certs init`: the same as --tls-ca DIR/ca.pem --tls-cert DIR/node.pem --tls-key DIR/node-key.pem")
	fs.StringVar(&t.tls.CA, "tls-ca", "", "PEM file of the cluster CA: peers (coordinators, workers) must present a certificate it signed")
	fs.StringVar(&t.tls.Cert, "tls-cert", "", "PEM certificate this member serves (API, Raft, data exchange) and presents to its peers")
	fs.StringVar(&t.tls.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.BoolVar(&t.tls.Insecure, "insecure", false, "allow plaintext on an address other than loopback")
}

// load returns the credentials (nil without TLS flags), or a usage error.
func (t *tlsFlags) load() (*rpc.Credentials, error) {
	if t.certs != "" {
		if t.tls.CA != "" || t.tls.Cert != "" || t.tls.Key != "" {
			return nil, usageError{errors.New("--certs and --tls-ca/--tls-cert/--tls-key exclude each other")}
		}
		t.tls.CA = filepath.Join(t.certs, certgen.CAFile)
		t.tls.Cert = filepath.Join(t.certs, certgen.NodeFile)
		t.tls.Key = filepath.Join(t.certs, certgen.NodeKeyFile)
	}
	creds, err := t.tls.Load(true)
	if err != nil {
		return nil, usageError{err}
	}
	return creds, nil
}

// checkListen refuses plaintext listeners beyond loopback unless
// --insecure; listeners are flag names and addresses, in pairs.
func (t *tlsFlags) checkListen(creds *rpc.Credentials, listeners ...string) error {
	for i := 0; i+1 < len(listeners); i += 2 {
		if err := creds.CheckListen(listeners[i], listeners[i+1], t.tls.Insecure); err != nil {
			return usageError{err}
		}
	}
	return nil
}
