package rpc

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
)

// ErrPoolClosed is what Pool.Get returns once the pool is closed.
var ErrPoolClosed = errors.New("rpc: connection pool closed")

// Pool holds one client connection per peer address, dialled with
// DialOptions (or a Credentials' DialOptions, see Credentials.NewPool) on
// first use: every call to a peer multiplexes over it. It
// is safe for concurrent use.
type Pool struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
	// dial gives the options of new connections; nil: DialOptions.
	dial func() []grpc.DialOption
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{conns: map[string]*grpc.ClientConn{}} }

// Get returns the connection to addr, creating it if needed.
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	if c := p.conns[addr]; c != nil {
		return c, nil
	}
	opts := DialOptions
	if p.dial != nil {
		opts = p.dial
	}
	c, err := grpc.NewClient(addr, opts()...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every connection; later Gets fail with ErrPoolClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, c := range p.conns {
		errs = append(errs, c.Close())
	}
	clear(p.conns)
	return errors.Join(errs...)
}
