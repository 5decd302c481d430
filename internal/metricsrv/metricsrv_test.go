package metricsrv

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// testRegistry has a series of tenant a, one of tenant b and one without
// a tenant.
func testRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	records := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eddy_test_records_total", Help: "test"}, []string{"tenant", "job"})
	records.WithLabelValues("a", "job-1").Add(3)
	records.WithLabelValues("b", "job-2").Add(5)
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "eddy_test_up", Help: "test"})
	up.Set(1)
	reg.MustRegister(records, up)
	return reg
}

func TestMount(t *testing.T) {
	errNoToken := errors.New("this call needs an API token\nsecond line")
	authorize := func(r *http.Request) (Scope, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer admin":
			return Scope{All: true}, nil
		case "Bearer a":
			return Scope{Tenant: "a"}, nil
		case "Bearer nobody":
			return Scope{Tenant: ""}, nil
		}
		return Scope{}, errNoToken
	}
	ready := errors.New("no known Raft leader")
	mux := http.NewServeMux()
	Mount(mux, Options{Gatherer: testRegistry(), Authorize: authorize, Ready: func() error { return ready }})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, tc := range []struct {
		name, path, token string
		code              int
		body              string   // contained, for answers that are not metrics
		series            []string // exactly these series, for metrics
	}{
		{name: "no token", path: "/metrics", code: 401, body: "this call needs an API token; second line\n"},
		{name: "admin", path: "/metrics", token: "admin", code: 200, series: []string{"eddy_test_records_total/a", "eddy_test_records_total/b", "eddy_test_up/"}},
		{name: "tenant a", path: "/metrics", token: "a", code: 200, series: []string{"eddy_test_records_total/a"}},
		{name: "empty tenant sees nothing", path: "/metrics", token: "nobody", code: 200, series: []string{}},
		{name: "healthz needs no token", path: "/healthz", code: 200, body: "ok"},
		{name: "readyz says why not", path: "/readyz", code: 503, body: "not ready: no known Raft leader\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d %q, want %d", resp.StatusCode, b, tc.code)
			}
			if tc.series == nil {
				if !strings.Contains(string(b), tc.body) || strings.Count(string(b), "\n") > 1 {
					t.Fatalf("body %q, want one line with %q", b, tc.body)
				}
				return
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for name, mf := range mfs {
				for _, m := range mf.GetMetric() {
					got = append(got, name+"/"+labelValue(m, TenantLabel))
				}
			}
			if strings.Join(slices.Sorted(slices.Values(got)), " ") != strings.Join(tc.series, " ") {
				t.Fatalf("series %v, want %v", got, tc.series)
			}
		})
	}
	ready = nil
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("readyz once ready: %d", resp.StatusCode)
	}
}
