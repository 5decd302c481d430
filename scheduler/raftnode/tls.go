package raftnode

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStreamLayer is raft's StreamLayer over mutual TLS: the listener
// refuses a peer without a certificate the config verifies, and Dial
// presents this member's certificate and verifies the peer's, so that
// only members of the cluster CA can vote, replicate or install
// snapshots.
type tlsStreamLayer struct {
	net.Listener
	advertise net.Addr
	cfg       *tls.Config
}

func newTLSStreamLayer(bind string, advertise net.Addr, cfg *tls.Config) (*tlsStreamLayer, error) {
	lis, err := tls.Listen("tcp", bind, cfg)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = lis.Addr()
	}
	return &tlsStreamLayer{Listener: lis, advertise: advertise, cfg: cfg}, nil
}

// Accept is the tls.Listener's: the handshake happens at the first
// read, on raft's goroutine for that connection, so that a slow or
// refused peer never holds up the accept loop; raft logs the failure.

// Addr is the address advertised to the other members.
func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }

// Dial connects to a member and completes the handshake within timeout.
func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: l.cfg}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft TLS dial %s: %w", address, err)
	}
	return c, nil
}
