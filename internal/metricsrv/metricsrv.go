// Package metricsrv serves a process's Prometheus metrics and its health
// endpoints over HTTP: /metrics, /healthz (liveness) and /readyz
// (readiness). The coordinator, the worker and standalone mount it on
// their --metrics listener; another listener (the REST API's) can mount
// the same handlers with Mount.
//
// It decides nothing about who may scrape what: the caller passes an
// Authorize function (the coordinator checks API tokens with the code of
// its Control service) and gets scoped output, every series for an admin,
// a tenant's series for a tenant. It is not the place for the metrics
// themselves: each package exports collectors of its own.
package metricsrv

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// TenantLabel is the label a tenant-scoped scrape filters on.
const TenantLabel = "tenant"

// Scope is what one scrape may see.
type Scope struct {
	// All: every series (an admin, or a listener without authentication).
	All bool
	// Tenant: with All false, only the series whose tenant label is this
	// tenant; series without a tenant label are hidden.
	Tenant string
}

// Options configure the handlers.
type Options struct {
	// Gatherer is the process's registry (never the global default, so
	// that two servers in one test binary do not share series).
	Gatherer prometheus.Gatherer
	// Authorize decides the scope of a scrape of /metrics; its error is
	// answered 401 with the error's message, one line. nil: every
	// scrape sees everything.
	Authorize func(r *http.Request) (Scope, error)
	// Ready reports readiness: nil for ready, else the reason, answered
	// 503. nil Ready: ready while serving.
	Ready func() error
}

// Mount adds /metrics, /healthz and /readyz to mux.
func Mount(mux *http.ServeMux, o Options) {
	all := promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		scope := Scope{All: true}
		if o.Authorize != nil {
			var err error
			if scope, err = o.Authorize(r); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="eddy"`)
				http.Error(w, oneLine(err), http.StatusUnauthorized)
				return
			}
		}
		if scope.All {
			all.ServeHTTP(w, r)
			return
		}
		promhttp.HandlerFor(TenantGatherer(o.Gatherer, scope.Tenant), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if o.Ready != nil {
			if err := o.Ready(); err != nil {
				http.Error(w, "not ready: "+oneLine(err), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
}

// TenantGatherer gathers from g only the series whose tenant label is
// tenant; a family left with no series is dropped.
func TenantGatherer(g prometheus.Gatherer, tenant string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			kept := mf.Metric[:0]
			for _, m := range mf.Metric {
				if labelValue(m, TenantLabel) == tenant && tenant != "" {
					kept = append(kept, m)
				}
			}
			if len(kept) > 0 {
				mf.Metric = kept
				out = append(out, mf)
			}
		}
		return out, err
	})
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// oneLine is err's message on one line: joined errors (a standalone's
// coordinator and worker readiness) separated by "; ".
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// Server is a --metrics listener.
type Server struct {
	lis net.Listener
	srv *http.Server
	tls bool
}

// Listen binds addr (port 0: one the kernel picks) and serves the
// handlers of o on it until Close: HTTPS with tlsConfig, plain HTTP when
// it is nil.
func Listen(addr string, o Options, tlsConfig *tls.Config) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	mux := http.NewServeMux()
	Mount(mux, o)
	s := &Server{lis: lis, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, tls: tlsConfig != nil}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// Addr is the address bound.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// URL is where /metrics is served.
func (s *Server) URL() string {
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.Addr() + "/metrics"
}

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }
