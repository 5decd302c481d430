package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/storage/s3test"
)

func s3Config(srv *s3test.Server) Config {
	cfg := DefaultConfig()
	cfg.Endpoint, cfg.UseTLS = srv.Endpoint, false
	cfg.AccessKey, cfg.SecretKey = srv.AccessKey, srv.SecretKey
	cfg.CreateBucket = true
	cfg.PartSize = testPartSize
	return cfg
}

func openS3Test(t *testing.T, url string, cfg Config) Store {
	t.Helper()
	st, err := Open(t.Context(), url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestS3Store(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int32
	for _, prefix := range []string{"", "some/prefix"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			suite{
				newStore: func(t *testing.T) Store {
					bucket := fmt.Sprintf("conformance-%03d", n.Add(1))
					return openS3Test(t, "s3://"+bucket+"/"+prefix, s3Config(srv))
				},
				writers:  4,
				putsEach: 10,
			}.run(t)
		})
	}
}

// TestS3Outage: with the server down every call fails with ErrUnavailable
// within a bounded time; when it returns, the same Store works again.
func TestS3Outage(t *testing.T) {
	srv := s3test.Start(t)
	st := openS3Test(t, srv.URL("outage", "chk"), s3Config(srv))
	put(t, st, "before", []byte("before"))

	srv.Stop()
	ctx := t.Context()
	const bound = 10 * time.Second // 3 attempts with backoff take about a second
	calls := []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return st.Put(ctx, "during", strings.NewReader("x"), 1) }},
		{"Put unknown size", func() error { return st.Put(ctx, "during", onlyReader{strings.NewReader("x")}, -1) }},
		{"Put multipart", func() error {
			return st.Put(ctx, "during", onlyReader{bytes.NewReader(randomBytes(2 * testPartSize))}, -1)
		}},
		{"Get", func() error { _, err := st.Get(ctx, "before"); return err }},
		{"Stat", func() error { _, err := st.Stat(ctx, "before"); return err }},
		{"List", func() error { _, err := st.List(ctx, ""); return err }},
		{"Delete", func() error { return st.Delete(ctx, "before") }},
		{"PutContent", func() error { _, err := PutContent(ctx, st, "m", []byte("wasm")); return err }},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with the server down: error %v, want ErrUnavailable", c.name, err)
			continue
		}
		if took > bound {
			t.Errorf("%s took %v to fail, want at most %v", c.name, took, bound)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "storage: unavailable: ") || strings.Contains(msg, "\n") {
			t.Errorf("%s error %q: want one line starting with storage: unavailable", c.name, msg)
		}
		t.Logf("%s failed after %v: %v", c.name, took.Round(time.Millisecond), err)
	}
	// Opening a store while the server is down fails the same way.
	if _, err := Open(ctx, srv.URL("outage", "other"), s3Config(srv)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open with the server down: error %v, want ErrUnavailable", err)
	}

	srv.Start()
	wantContent(t, st, "before", []byte("before"))
	put(t, st, "after", []byte("after"))
	wantContent(t, st, "after", []byte("after"))
	if got := keys(t, st, ""); strings.Join(got, ",") != "after,before" {
		t.Errorf("List after restart = %q, want [after before]", got)
	}
}

func TestS3Open(t *testing.T) {
	srv := s3test.Start(t)
	ctx := t.Context()
	cfg := s3Config(srv)

	// The URL's query is enough besides credentials.
	plain := DefaultConfig()
	plain.AccessKey, plain.SecretKey, plain.CreateBucket = srv.AccessKey, srv.SecretKey, true
	st := openS3Test(t, srv.URL("by-url", "x/y"), plain)
	put(t, st, "k", []byte("v"))

	// Two prefixes in one bucket do not see each other; the bucket root
	// sees both.
	other := openS3Test(t, srv.URL("by-url", "x/y2"), plain)
	if got := keys(t, other, ""); len(got) != 0 {
		t.Errorf("store with prefix x/y2 lists %q", got)
	}
	wantNotFound(t, other, "k")
	root := openS3Test(t, srv.URL("by-url", ""), plain)
	put(t, other, "k2", []byte("v2"))
	if got := strings.Join(keys(t, root, ""), ","); got != "x/y/k,x/y2/k2" {
		t.Errorf("bucket root lists %q", got)
	}
	wantContent(t, root, "x/y/k", []byte("v"))

	// Credentials and endpoint from the environment, as eddy processes get them.
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	envCfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	fromEnv := openS3Test(t, "s3://by-url/x/y", envCfg)
	wantContent(t, fromEnv, "k", []byte("v"))

	// A missing bucket is an error unless CreateBucket is set.
	noCreate := cfg
	noCreate.CreateBucket = false
	if _, err := Open(ctx, "s3://no-such-bucket", noCreate); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open of a missing bucket: error %v", err)
	}
	// Wrong credentials: a clear error, and not "unavailable".
	wrong := cfg
	wrong.SecretKey = "not-the-secret"
	_, err = Open(ctx, "s3://by-url", wrong)
	if err == nil || errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("Open with a wrong secret: error %v, want a non-unavailable error without the secret", err)
	} else {
		t.Logf("wrong secret: %v", err)
	}
	// Nothing listens on this port.
	closed := cfg
	closed.Endpoint = "127.0.0.1:1"
	if _, err := Open(ctx, "s3://by-url", closed); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open of a closed port: error %v, want ErrUnavailable", err)
	}
}

// TestS3GetWhileReplaced: a reader opened before an overwrite yields one
// whole version (or fails), never a mix.
func TestS3GetWhileReplaced(t *testing.T) {
	srv := s3test.Start(t)
	st := openS3Test(t, srv.URL("replace", ""), s3Config(srv))
	v1 := bytes.Repeat([]byte("1"), 3<<20)
	v2 := bytes.Repeat([]byte("2"), 3<<20)
	put(t, st, "k", v1)
	rc, err := st.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	put(t, st, "k", v2)
	rest, err := io.ReadAll(rc)
	if err == nil {
		got := append(head, rest...)
		if !bytes.Equal(got, v1) && !bytes.Equal(got, v2) {
			t.Fatalf("read a mix of versions (%d bytes)", len(got))
		}
	} else {
		t.Logf("read after overwrite failed (allowed): %v", err)
	}
	wantContent(t, st, "k", v2)
}
