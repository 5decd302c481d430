package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// fakeControl answers JobStatus with err (or a RUNNING job) and records
// the metadata the gateway sent. Other methods are not called.
type fakeControl struct {
	eddyv1.ControlClient
	err  error
	md   metadata.MD
	req  *eddyv1.JobStatusRequest
	logs *eddyv1.JobLogsRequest
}

func (f *fakeControl) JobLogs(_ context.Context, req *eddyv1.JobLogsRequest, _ ...grpc.CallOption) (*eddyv1.JobLogsResponse, error) {
	f.logs = req
	return &eddyv1.JobLogsResponse{NextSeq: req.GetAfterSeq() + 1}, nil
}

func (f *fakeControl) JobStatus(ctx context.Context, req *eddyv1.JobStatusRequest, _ ...grpc.CallOption) (*eddyv1.JobStatusResponse, error) {
	f.md, _ = metadata.FromOutgoingContext(ctx)
	f.req = req
	if f.err != nil {
		return nil, f.err
	}
	return &eddyv1.JobStatusResponse{Job: &eddyv1.JobSummary{JobId: req.GetJobId(), State: eddyv1.JobState_JOB_STATE_RUNNING}}, nil
}

func serve(t *testing.T, control eddyv1.ControlClient, root http.Handler) *httptest.Server {
	t.Helper()
	s, err := New(context.Background(), control, root)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestErrorMapping: each gRPC code of the Control service's errors
// becomes its HTTP status, with the one-line message in a JSON body.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		want int
	}{
		{"no or bad token", codes.Unauthenticated, http.StatusUnauthorized},
		{"role too low", codes.PermissionDenied, http.StatusForbidden},
		{"another tenant's job", codes.NotFound, http.StatusNotFound},
		{"bad request", codes.InvalidArgument, http.StatusBadRequest},
		{"wrong state", codes.FailedPrecondition, http.StatusBadRequest},
		{"exists", codes.AlreadyExists, http.StatusConflict},
		{"quota", codes.ResourceExhausted, http.StatusTooManyRequests},
		{"no leader", codes.Unavailable, http.StatusServiceUnavailable},
		{"savepoint failed", codes.Aborted, http.StatusConflict},
		{"deadline", codes.DeadlineExceeded, http.StatusGatewayTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := "job j1: " + tc.name
			srv := serve(t, &fakeControl{err: status.Error(tc.code, msg)}, nil)
			resp, body := get(t, srv.URL+"/v1/jobs/j1", nil)
			if resp.StatusCode != tc.want {
				t.Fatalf("%v: HTTP %d, want %d (%s)", tc.code, resp.StatusCode, tc.want, body)
			}
			var got struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if got.Code != int(tc.code) || got.Message != msg {
				t.Fatalf("body %+v, want code %d message %q", got, tc.code, msg)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			challenge := resp.Header.Get("WWW-Authenticate")
			if (tc.code == codes.Unauthenticated) != (challenge == `Bearer realm="eddy"`) {
				t.Fatalf("WWW-Authenticate %q on %v", challenge, tc.code)
			}
		})
	}
}

// TestHeaders: the bearer token reaches the gRPC metadata as
// "authorization"; headers a client could use to pose as a member
// (Grpc-Metadata-*) do not.
func TestHeaders(t *testing.T) {
	f := &fakeControl{}
	srv := serve(t, f, nil)
	resp, body := get(t, srv.URL+"/v1/jobs/j-1.a?tenant=acme", http.Header{
		"Authorization":                   {"Bearer eddy_abc_def"},
		"Grpc-Metadata-Eddy-Forwarded-By": {"c9"},
		"Grpc-Metadata-Authorization":     {"Bearer eddy_forged_x"},
		"X-Custom":                        {"1"},
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d %s", resp.StatusCode, body)
	}
	if got := f.md.Get("authorization"); len(got) != 1 || got[0] != "Bearer eddy_abc_def" {
		t.Fatalf("authorization metadata %q, want the one bearer token", got)
	}
	for _, k := range []string{"eddy-forwarded-by", "x-custom", "grpcgateway-x-custom"} {
		if v := f.md.Get(k); len(v) > 0 {
			t.Fatalf("metadata %s=%q forwarded from an HTTP header", k, v)
		}
	}
	if f.req.GetJobId() != "j-1.a" || f.req.GetTenant() != "acme" {
		t.Fatalf("request %v: path and query parameters not decoded", f.req)
	}
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if job, _ := st["job"].(map[string]any); job["jobId"] != "j-1.a" || job["state"] != "JOB_STATE_RUNNING" {
		t.Fatalf("answer %s: want lowerCamelCase fields and enum names", body)
	}
}

// TestQueryNames: query parameters take a field's proto name or its JSON
// name, as the README says.
func TestQueryNames(t *testing.T) {
	for _, query := range []string{"after_seq=41&wait_ms=7", "afterSeq=41&waitMs=7"} {
		f := &fakeControl{}
		srv := serve(t, f, nil)
		resp, body := get(t, srv.URL+"/v1/jobs/j1/logs?"+query, nil)
		if resp.StatusCode != http.StatusOK || f.logs.GetAfterSeq() != 41 || f.logs.GetWaitMs() != 7 || f.logs.GetJobId() != "j1" {
			t.Fatalf("?%s: %d %s, request %v", query, resp.StatusCode, body, f.logs)
		}
		// Unset fields are emitted; uint64 is a string.
		if !strings.HasPrefix(string(body), `{"lines":[],"nextSeq":"42",`) {
			t.Fatalf("?%s: answer %s", query, body)
		}
	}
}

// TestRoutes: the OpenAPI description is served; the root handler gets
// what no route claims, and added routes take precedence over it.
func TestRoutes(t *testing.T) {
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "root "+r.URL.Path) })
	s, err := New(context.Background(), &fakeControl{}, root)
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") }))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	resp, body := get(t, srv.URL+OpenAPIPath, nil)
	var doc struct {
		Swagger string                    `json:"swagger"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("openapi: %d %v", resp.StatusCode, err)
	}
	if doc.Swagger != "2.0" || doc.Paths["/v1/jobs"]["get"] == nil || doc.Paths["/v1/jobs"]["post"] == nil {
		t.Fatalf("openapi: no GET and POST /v1/jobs in %v", doc.Paths["/v1/jobs"])
	}
	for path, want := range map[string]string{"/metrics": "metrics", "/": "root /", "/jobs/x": "root /jobs/x"} {
		if _, body := get(t, srv.URL+path, nil); string(body) != want {
			t.Fatalf("GET %s: %q, want %q", path, body, want)
		}
	}
	if resp, _ := get(t, srv.URL+"/v1/nothing", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown /v1 route: %d", resp.StatusCode)
	}
}

// TestEveryMethodRouted: every Control RPC but the members' own (Join,
// Leave) has a REST route (an operation in the OpenAPI description), so
// a new RPC without a rule in control_http.yaml fails here; the Cluster
// service has none.
func TestEveryMethodRouted(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(eddyv1.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	routed := map[string]bool{}
	for _, ops := range doc.Paths {
		for _, op := range ops {
			routed[op.OperationID] = true
		}
	}
	for _, m := range eddyv1.Control_ServiceDesc.Methods {
		switch member := m.MethodName == "Join" || m.MethodName == "Leave"; {
		case member && routed["Control_"+m.MethodName]:
			t.Errorf("Control.%s, the members' own call, has a REST route", m.MethodName)
		case !member && !routed["Control_"+m.MethodName]:
			t.Errorf("Control.%s has no REST route: add one to proto/eddy/v1/control_http.yaml", m.MethodName)
		}
	}
	for _, m := range eddyv1.Cluster_ServiceDesc.Methods {
		if routed["Cluster_"+m.MethodName] {
			t.Errorf("Cluster.%s, for members only, has a REST route", m.MethodName)
		}
	}
}
