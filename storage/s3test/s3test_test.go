package s3test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestStopStart(t *testing.T) {
	srv := Start(t)
	healthy := func() bool {
		c := &http.Client{Timeout: time.Second}
		resp, err := c.Get("http://" + srv.Endpoint + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !srv.Running() || !healthy() {
		t.Fatal("server not answering after Start")
	}
	if got, want := srv.URL("b", "/p/q/"), "s3://b/p/q?endpoint="+srv.Endpoint+"&tls=false"; got != want {
		t.Errorf("URL = %s, want %s", got, want)
	}
	if env := strings.Join(srv.Env(), " "); !strings.Contains(env, "EDDY_S3_ENDPOINT="+srv.Endpoint) ||
		!strings.Contains(env, "EDDY_S3_TLS=false") || !strings.Contains(env, "EDDY_S3_SECRET_KEY="+SecretKey) {
		t.Errorf("Env = %s", env)
	}

	srv.Stop()
	if srv.Running() || healthy() {
		t.Fatal("server still answering after Stop")
	}
	srv.Start()
	if !srv.Running() || !healthy() {
		t.Fatal("server not answering after restart")
	}
}
