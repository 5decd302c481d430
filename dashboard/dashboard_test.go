package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	for _, tc := range []struct {
		name, method, path string
		status             int
		contentType        string
		bodyHas            string
	}{
		{"root is the app", "GET", "/", 200, "text/html; charset=utf-8", `<div id="app">`},
		{"a page of the app", "GET", "/jobs/default-1", 200, "text/html; charset=utf-8", `<div id="app">`},
		{"the cluster page", "GET", "/cluster?x=1", 200, "text/html; charset=utf-8", `src="/app.js"`},
		{"script", "GET", "/app.js", 200, "text/javascript; charset=utf-8", "/v1/jobs"},
		{"style", "GET", "/app.css", 200, "text/css; charset=utf-8", "#graph"},
		{"head", "HEAD", "/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"api paths are not the app", "GET", "/v1/jobs", 404, "text/plain; charset=utf-8", "not found"},
		{"api root", "GET", "/v1", 404, "text/plain; charset=utf-8", "not found"},
		{"dot segments stay inside", "GET", "/x/../../v1/jobs", 404, "text/plain; charset=utf-8", "not found"},
		{"post", "POST", "/", 405, "text/plain; charset=utf-8", "method not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.contentType || !strings.Contains(string(body), tc.bodyHas) {
				t.Fatalf("%s %s: %d %q %.80q, want %d %q containing %q", tc.method, tc.path, resp.StatusCode,
					resp.Header.Get("Content-Type"), body, tc.status, tc.contentType, tc.bodyHas)
			}
			if tc.status == 200 {
				if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
					t.Errorf("Cache-Control = %q, want no-cache", cc)
				}
				if resp.Header.Get("ETag") == "" || resp.Header.Get("Content-Security-Policy") == "" {
					t.Errorf("missing ETag or CSP: %v", resp.Header)
				}
			}
		})
	}
}

// TestHandlerRevalidate: a browser that has the current file gets a 304,
// one with an older copy gets the file.
func TestHandlerRevalidate(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/app.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	for _, tc := range []struct {
		name, ifNoneMatch string
		status            int
	}{
		{"current", etag, http.StatusNotModified},
		{"stale", `"0000"`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/app.js", nil)
			req.Header.Set("If-None-Match", tc.ifNoneMatch)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("If-None-Match %s: %d, want %d", tc.ifNoneMatch, resp.StatusCode, tc.status)
			}
		})
	}
}
