package main

// The coordinator's HTTP listener (--http): the REST/JSON gateway of the
// Control service and its OpenAPI description (internal/httpapi).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"google.golang.org/grpc"

	"github.com/eddy-stream/eddy/internal/httpapi"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/coordinator"
)

// httpFlagUsage is the help of --http on the server commands.
const httpFlagUsage = "HTTP listen address of the REST/JSON API (/v1/…, OpenAPI at /openapi.json) and the web dashboard (/); port 0 as for --api; empty: none. With TLS flags it serves HTTPS with this member's certificate"

// httpServer is a running --http listener and its connection to the
// coordinator's own gRPC API.
type httpServer struct {
	*httpapi.Server
	conn *grpc.ClientConn
}

// close stops serving, then drops the connection; nil-safe, so callers
// may defer it whether or not --http was given.
func (h *httpServer) close() {
	if h == nil {
		return
	}
	_ = h.Close()
	_ = h.conn.Close()
}

// checkHTTPListen refuses a plaintext --http beyond loopback, as for the
// other listeners; before the server starts, so that it fails alone.
func checkHTTPListen(tf *tlsFlags, creds *rpc.Credentials, addr string) error {
	if addr == "" {
		return nil
	}
	return tf.checkListen(creds, "--http", addr)
}

// startHTTP serves --http addr (nothing when addr is empty) for coord,
// with root at every path no route claims (nil: none). The gateway dials
// the coordinator's API like any client: it checks the server's
// certificate against the cluster CA but presents none of its own, so a
// REST call is authenticated by its bearer token alone, never as a
// cluster member.
func startHTTP(ctx context.Context, addr string, tf *tlsFlags, creds *rpc.Credentials, coord *coordinator.Coordinator, root http.Handler, log *slog.Logger, stdout io.Writer) (*httpServer, error) {
	if addr == "" {
		return nil, nil
	}
	client, err := rpc.TLS{CA: tf.tls.CA}.Load(false)
	if err != nil {
		return nil, usageError{err}
	}
	conn, err := grpc.NewClient(coord.Addr(), client.DialOptions()...)
	if err != nil {
		return nil, fmt.Errorf("--http: dial the coordinator's API %s: %w", coord.Addr(), err)
	}
	srv, err := httpapi.New(ctx, eddyv1.NewControlClient(conn), root)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := srv.Listen(addr, creds.ServerConfig(rpc.VerifyIfGiven), log); err != nil {
		conn.Close()
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	scheme := "http"
	if creds != nil {
		scheme = "https"
	}
	// Like the other listeners' lines: what scripts and tests read to
	// find a port the kernel picked.
	fmt.Fprintf(stdout, "http API on %s://%s (OpenAPI at /openapi.json)\n", scheme, srv.Addr())
	return &httpServer{Server: srv, conn: conn}, nil
}
