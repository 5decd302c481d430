package main

// --metrics: the Prometheus and health listener of the server modes
// (internal/metricsrv), with one registry per process.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eddy-stream/eddy/internal/metricsrv"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/worker"
)

// metricsFlags fill the --metrics listener's address.
type metricsFlags struct{ addr string }

func (m *metricsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.addr, "metrics", "", "listen address of /metrics (Prometheus), /healthz and /readyz (port 0: one the kernel picks; printed once serving; empty: none)")
}

// newRegistry is a process's registry: the Go runtime's and the process's
// own series, and whatever the server adds.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// check refuses a plaintext --metrics beyond loopback, before anything
// starts.
func (m *metricsFlags) check(tf *tlsFlags, creds *rpc.Credentials) error {
	if m.addr == "" {
		return nil
	}
	return tf.checkListen(creds, "--metrics", m.addr)
}

// serve starts the listener, when --metrics is set, and prints where it
// serves. With the cluster's TLS it serves HTTPS with the member
// certificate (a scraper needs the CA, no certificate of its own);
// without, plaintext on loopback only unless --insecure, as the other
// listeners: a scrape of the coordinator carries a token.
func (m *metricsFlags) serve(what string, o metricsrv.Options, creds *rpc.Credentials, stdout io.Writer) (*metricsrv.Server, error) {
	if m.addr == "" {
		return nil, nil
	}
	srv, err := metricsrv.Listen(m.addr, o, creds.ServerConfig(rpc.VerifyIfGiven))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "%s metrics on %s\n", what, srv.URL())
	return srv, nil
}

// workerReady is the readiness of a worker that may not exist yet: the
// listener serves while Start is still registering.
type workerReady struct{ w atomic.Pointer[worker.Worker] }

func (r *workerReady) ready() error {
	w := r.w.Load()
	if w == nil {
		return errors.New("not registered with the coordinator leader")
	}
	return w.Ready()
}
