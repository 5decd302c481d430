// Package s3test runs a real S3-compatible server for tests: versitygw
// (Apache-2.0) with its posix backend, as its own process on a free
// 127.0.0.1 port over a temporary directory, stopped when the test ends.
// Stop and Start simulate an outage.
//
//	srv := s3test.Start(t)
//	cfg := storage.DefaultConfig()
//	cfg.Endpoint, cfg.UseTLS = srv.Endpoint, false
//	cfg.AccessKey, cfg.SecretKey = srv.AccessKey, srv.SecretKey
//	cfg.CreateBucket = true
//	st, err := storage.Open(ctx, "s3://test/prefix", cfg)
//
// Processes that a test starts (eddy standalone, workers) find the server
// through the environment: append srv.Env() to their exec.Cmd.Env.
//
// The binary is $EDDY_VERSITYGW if set, or else the one that
// scripts/versitygw.sh installs in a cache outside the repository (the first
// run builds it, which takes a few minutes). EDDY_SKIP_S3=1 skips the tests
// that need it; nothing else does, since CI must run them.
//
// It is for tests only: nothing here is hardened, and the server keeps no
// data beyond the test.
package s3test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the versitygw release that scripts/versitygw.sh installs.
const Version = "v1.8.0"

// Root credentials of every test server.
const (
	AccessKey = "eddy-test-access"
	SecretKey = "eddy-test-secret-key"
)

// startTimeout bounds how long a (re)started server may take to answer; it
// is ready in milliseconds on an idle machine.
const startTimeout = 30 * time.Second

// Server is one running versitygw process. Its methods must not be called
// concurrently with each other.
type Server struct {
	Endpoint  string // 127.0.0.1:PORT, what storage.Config.Endpoint wants
	AccessKey string
	SecretKey string
	Dir       string // the posix root: one sub-directory per bucket

	t       testing.TB
	bin     string
	logPath string
	proc    *os.Process
	exited  chan struct{} // closed when proc has been waited for
}

// Start runs a server for the rest of the test and returns once it
// answers. It skips the test if EDDY_SKIP_S3=1 and fails it if the server
// cannot be installed or started.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir() // created before the Cleanup below, so removed after it
	s := &Server{
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		Dir:       filepath.Join(dir, "data"),
		t:         t,
		bin:       bin,
		logPath:   filepath.Join(dir, "versitygw.log"),
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			s.dumpLog()
		}
	})
	// A free port can be taken by someone else before versitygw binds it;
	// then try another.
	var err error
	for range 5 {
		s.Endpoint, err = freeAddr()
		if err != nil {
			break
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	s.dumpLog()
	t.Fatalf("s3test: start versitygw: %v", err)
	return nil
}

// Stop kills the server, as a crash would, and returns once it is gone:
// requests then fail with "connection refused". Its data stays for Start.
func (s *Server) Stop() {
	s.t.Helper()
	if s.proc == nil {
		s.t.Fatalf("s3test: Stop: server is not running")
	}
	s.kill()
}

// Start restarts a stopped server on the same address and data, and
// returns once it answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.proc != nil {
		s.t.Fatalf("s3test: Start: server is already running")
	}
	// The port was ours a moment ago; retry briefly in case the kernel
	// still holds it.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.dumpLog()
			s.t.Fatalf("s3test: restart versitygw on %s: %v", s.Endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running reports whether the server process is up.
func (s *Server) Running() bool { return s.proc != nil }

// URL returns the storage URL of bucket (and optional key prefix) on this
// server, with the endpoint and tls=false in its query. Credentials are
// not in it: set them in storage.Config or through Env.
func (s *Server) URL(bucket, prefix string) string {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + strings.Trim(prefix, "/")
	}
	return u + "?endpoint=" + s.Endpoint + "&tls=false"
}

// Env returns the environment variables through which storage.ConfigFromEnv
// (and so an eddy process) reaches this server.
func (s *Server) Env() []string {
	return []string{
		"EDDY_S3_ACCESS_KEY=" + s.AccessKey,
		"EDDY_S3_SECRET_KEY=" + s.SecretKey,
		"EDDY_S3_ENDPOINT=" + s.Endpoint,
		"EDDY_S3_TLS=false",
	}
}

func (s *Server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- %s: starting on %s\n", time.Now().Format(time.RFC3339Nano), s.Endpoint)
	cmd := exec.Command(s.bin,
		"--port", s.Endpoint,
		"--health", "/health",
		"--keep-alive", // like a real S3: pooled connections go stale when it dies
		"--quiet",
		"posix", s.Dir)
	// A clean environment: versitygw also reads VGW_*, LOGFILE, WEBHOOK…
	cmd.Env = []string{
		"ROOT_ACCESS_KEY=" + s.AccessKey,
		"ROOT_SECRET_KEY=" + s.SecretKey,
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Dir(s.Dir),
		"TMPDIR=" + os.TempDir(),
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.proc, s.exited = cmd.Process, exited
	if err := s.waitReady(); err != nil {
		s.kill()
		return err
	}
	return nil
}

// waitReady polls the health endpoint until it answers 200, the process
// exits, or startTimeout passes.
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: time.Second}
	url := "http://" + s.Endpoint + "/health"
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited (see its log above): %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", startTimeout, err)
		}
	}
}

// kill stops the process, if any, and waits for it.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	<-s.exited
	s.proc, s.exited = nil, nil
}

func (s *Server) dumpLog() {
	b, err := os.ReadFile(s.logPath)
	if err != nil || len(b) == 0 {
		return
	}
	if len(b) > 16<<10 {
		b = b[len(b)-16<<10:]
	}
	s.t.Logf("s3test: versitygw log (%s):\n%s", s.logPath, b)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the versitygw binary, installing it with
// scripts/versitygw.sh on first use (once per test process; the script
// itself serializes concurrent test processes). It skips the test if
// EDDY_SKIP_S3=1.
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv("EDDY_SKIP_S3") == "1" {
		t.Skip("s3test: EDDY_SKIP_S3=1: skipping a test that needs the versitygw S3 server")
	}
	binary.once.Do(func() { binary.path, binary.err = findBinary() })
	if binary.err != nil {
		t.Fatalf("s3test: %v", binary.err)
	}
	return binary.path
}

func findBinary() (string, error) {
	if p := os.Getenv("EDDY_VERSITYGW"); p != "" {
		if err := isExecutable(p); err != nil {
			return "", fmt.Errorf("EDDY_VERSITYGW: %w", err)
		}
		return p, nil
	}
	script, err := findScript()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("sh", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v\n%s", script, err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	p := lines[len(lines)-1]
	if err := isExecutable(p); err != nil {
		return "", fmt.Errorf("%s printed %q: %w", script, p, err)
	}
	return p, nil
}

// findScript looks for scripts/versitygw.sh in the working directory (a
// test runs in its package's directory) and its parents.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "versitygw.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/versitygw.sh not found above the working directory; set EDDY_VERSITYGW to a versitygw " + Version + " binary")
		}
		dir = parent
	}
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
