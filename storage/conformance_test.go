package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// testPartSize is the smallest part S3 allows, so that the multipart
// paths run with objects of a few MiB.
const testPartSize = 5 << 20

// suite is what both stores must do; newStore returns an empty store of
// its own for each subtest.
type suite struct {
	newStore func(t *testing.T) Store
	// hammer sizes the concurrency test (writers × puts each).
	writers, putsEach int
}

func (s suite) run(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, st Store)
	}{
		{"PutGetStat", testPutGetStat},
		{"NotFound", testNotFound},
		{"Overwrite", testOverwrite},
		{"Empty", testEmpty},
		{"UnknownSizeSmall", testUnknownSizeSmall},
		{"LargeUnknownSize", testLargeUnknownSize},
		{"LargeKnownSizeStream", testLargeKnownSizeStream},
		{"ShortReader", testShortReader},
		{"FailingReader", testFailingReader},
		{"List", testList},
		{"Delete", testDelete},
		{"SpecialKeys", testSpecialKeys},
		{"InvalidKeys", testInvalidKeys},
		{"Content", testContent},
		{"ContextCanceled", testContextCanceled},
		{"Closed", testClosed},
		{"Concurrent", func(t *testing.T, st Store) { testConcurrent(t, st, s.writers, s.putsEach) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := s.newStore(t)
			c.fn(t, st)
		})
	}
}

func put(t *testing.T, st Store, key string, data []byte) {
	t.Helper()
	if err := st.Put(t.Context(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, st Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b
}

func wantContent(t *testing.T, st Store, key string, want []byte) {
	t.Helper()
	got := get(t, st, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes (sha %x), want %d bytes (sha %x)",
			key, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

func wantNotFound(t *testing.T, st Store, key string) {
	t.Helper()
	if rc, err := st.Get(t.Context(), key); !errors.Is(err, ErrNotFound) {
		if err == nil {
			rc.Close()
		}
		t.Fatalf("Get(%q) error = %v, want ErrNotFound", key, err)
	}
	if _, err := st.Stat(t.Context(), key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat(%q) error = %v, want ErrNotFound", key, err)
	}
}

func keys(t *testing.T, st Store, prefix string) []string {
	t.Helper()
	infos, err := st.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	out := []string{}
	for _, in := range infos {
		out = append(out, in.Key)
	}
	return out
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// onlyReader hides every interface but io.Reader (no Seek, ReadAt,
// WriteTo), as a network stream would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

var errBoom = errors.New("boom: source broke")

// failingReader yields n bytes of data, then errBoom.
type failingReader struct {
	data []byte
	n    int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errBoom
	}
	k := copy(p[:min(len(p), f.n)], f.data)
	f.data, f.n = f.data[k:], f.n-k
	return k, nil
}

func testPutGetStat(t *testing.T, st Store) {
	before := time.Now().Add(-time.Minute) // the server's clock may differ a little
	data := []byte("hello, eddy")
	put(t, st, "jobs/j1/chk-1/state.sst", data)
	wantContent(t, st, "jobs/j1/chk-1/state.sst", data)
	info, err := st.Stat(t.Context(), "jobs/j1/chk-1/state.sst")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "jobs/j1/chk-1/state.sst" || info.Size != int64(len(data)) {
		t.Errorf("Stat = %+v, want key jobs/j1/chk-1/state.sst size %d", info, len(data))
	}
	if info.Modified.Before(before) || info.Modified.After(time.Now().Add(time.Minute)) {
		t.Errorf("Stat.Modified = %v, want about now", info.Modified)
	}
}

func testNotFound(t *testing.T, st Store) {
	wantNotFound(t, st, "missing")
	wantNotFound(t, st, "missing/deeper/key")
	put(t, st, "dir/obj", []byte("x"))
	wantNotFound(t, st, "dir")          // a "directory" is no object
	wantNotFound(t, st, "dir/obj/more") // nor is a path through an object
	_, err := st.Stat(t.Context(), "nope/x")
	if err == nil || !strings.Contains(err.Error(), "nope/x") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q: want one line naming the key", err)
	}
}

func testOverwrite(t *testing.T, st Store) {
	put(t, st, "k", bytes.Repeat([]byte("1"), 1000))
	put(t, st, "k", []byte("22"))
	wantContent(t, st, "k", []byte("22"))
	if info, err := st.Stat(t.Context(), "k"); err != nil || info.Size != 2 {
		t.Fatalf("Stat = %+v, %v; want size 2", info, err)
	}
	if got := keys(t, st, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List = %q, want [k]", got)
	}
}

func testEmpty(t *testing.T, st Store) {
	put(t, st, "empty", nil)
	wantContent(t, st, "empty", []byte{})
	if err := st.Put(t.Context(), "empty2", onlyReader{bytes.NewReader(nil)}, -1); err != nil {
		t.Fatal(err)
	}
	wantContent(t, st, "empty2", []byte{})
	if info, err := st.Stat(t.Context(), "empty2"); err != nil || info.Size != 0 {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
}

func testUnknownSizeSmall(t *testing.T, st Store) {
	data := randomBytes(100 << 10)
	if err := st.Put(t.Context(), "small", onlyReader{bytes.NewReader(data)}, -1); err != nil {
		t.Fatal(err)
	}
	wantContent(t, st, "small", data)
}

// testLargeUnknownSize streams more than two parts of unknown size, which
// the s3 store must upload as multipart.
func testLargeUnknownSize(t *testing.T, st Store) {
	data := randomBytes(2*testPartSize + 12345)
	if err := st.Put(t.Context(), "big/unknown", onlyReader{bytes.NewReader(data)}, -1); err != nil {
		t.Fatal(err)
	}
	wantContent(t, st, "big/unknown", data)
	if info, err := st.Stat(t.Context(), "big/unknown"); err != nil || info.Size != int64(len(data)) {
		t.Fatalf("Stat = %+v, %v; want size %d", info, err, len(data))
	}
	if s3, ok := st.(*s3Store); ok {
		oi, err := s3.client.StatObject(t.Context(), s3.bucket, s3.prefix+"big/unknown", minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(oi.ETag, "-") { // multipart ETags end in -<parts>
			t.Errorf("ETag %q: want a multipart upload", oi.ETag)
		}
	}
}

func testLargeKnownSizeStream(t *testing.T, st Store) {
	data := randomBytes(testPartSize + 777)
	if err := st.Put(t.Context(), "big/known", onlyReader{bytes.NewReader(data)}, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	wantContent(t, st, "big/known", data)
	// A reader with more bytes than announced: only size bytes are stored.
	more := append(slices.Clone(data), "trailing"...)
	if err := st.Put(t.Context(), "big/known", onlyReader{bytes.NewReader(more)}, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	wantContent(t, st, "big/known", data)
}

func testShortReader(t *testing.T, st Store) {
	for _, n := range []int{100, testPartSize + 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			old := []byte("previous")
			put(t, st, "short", old)
			data := randomBytes(n)
			err := st.Put(t.Context(), "short", onlyReader{bytes.NewReader(data[:n/2])}, int64(n))
			if !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("Put with a short reader: error %v, want io.ErrUnexpectedEOF and not ErrUnavailable", err)
			}
			wantContent(t, st, "short", old)
			err = st.Put(t.Context(), "short-new", onlyReader{bytes.NewReader(data[:n/2])}, int64(n))
			if err == nil {
				t.Fatal("Put with a short reader succeeded")
			}
			wantNotFound(t, st, "short-new")
		})
	}
}

// testFailingReader: a Put whose source fails stores nothing and leaves the
// previous object, whatever path the upload takes.
func testFailingReader(t *testing.T, st Store) {
	old := []byte("previous version")
	put(t, st, "f", old)
	for _, c := range []struct {
		name      string
		n, failAt int
		size      int64
	}{
		{"small known size", 1000, 500, 1000},
		{"small unknown size", 1000, 500, -1},
		{"multipart known size", 2 * testPartSize, testPartSize + 10, 2 * testPartSize},
		{"multipart unknown size", 3 * testPartSize, 2*testPartSize + 10, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := randomBytes(c.n)
			err := st.Put(t.Context(), "f", &failingReader{data: data, n: c.failAt}, c.size)
			if !errors.Is(err, errBoom) {
				t.Fatalf("Put error = %v, want the reader's error", err)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Fatalf("Put error = %v: the source's failure is not the store's", err)
			}
			wantContent(t, st, "f", old)
			if got := keys(t, st, ""); !slices.Equal(got, []string{"f"}) {
				t.Fatalf("List = %q, want [f]: a failed Put left something", got)
			}
		})
	}
}

func testList(t *testing.T, st Store) {
	all := []string{"a.txt", "a/b", "a/c/d", "ab", "b/x", "chk-1/x", "chk-10/y", "z"}
	for i, k := range slices.Backward(all) { // in reverse, so order comes from List
		put(t, st, k, bytes.Repeat([]byte{'x'}, i+1)) // sizes tell the keys apart
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", []string{"a.txt", "a/b", "a/c/d", "ab"}},
		{"a/", []string{"a/b", "a/c/d"}},
		{"a/c", []string{"a/c/d"}},
		{"a/c/", []string{"a/c/d"}},
		{"a/c/d", []string{"a/c/d"}},
		{"chk-1", []string{"chk-1/x", "chk-10/y"}},
		{"chk-1/", []string{"chk-1/x"}},
		{"c", []string{"chk-1/x", "chk-10/y"}},
		{"nothing", []string{}},
		{"nothing/", []string{}},
		{"a/b/", []string{}}, // under an object, not a directory
	} {
		if got := keys(t, st, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	infos, err := st.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		i := slices.Index(all, in.Key)
		if in.Size != int64(i+1) || in.Modified.IsZero() {
			t.Errorf("List: %+v: want size %d and a modification time", in, i+1)
		}
	}
}

func testDelete(t *testing.T, st Store) {
	put(t, st, "d/1", []byte("1"))
	put(t, st, "d/2", []byte("2"))
	if err := st.Delete(t.Context(), "d/1"); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, st, "d/1")
	wantContent(t, st, "d/2", []byte("2"))
	if err := st.Delete(t.Context(), "d/1"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := st.Delete(t.Context(), "never/there"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if err := st.Delete(t.Context(), "d"); err != nil { // a "directory": no object, nothing to do
		t.Fatalf("Delete(d): %v", err)
	}
	wantContent(t, st, "d/2", []byte("2"))
	if err := st.Delete(t.Context(), "d/2"); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, st, ""); len(got) != 0 {
		t.Fatalf("List after deleting all = %q", got)
	}
	// Once nothing is under "d/", "d" may be an object.
	put(t, st, "d", []byte("now a file"))
	wantContent(t, st, "d", []byte("now a file"))
}

var specialKeys = []string{
	"with space/and more spaces ",
	"ümlaut/日本語/emoji-🚀",
	"plus+sign",
	"percent%20encoded%",
	"query?x=1&y=2#frag",
	"colon:at@semi;comma,",
	"tilde~bang!dollar$quote'paren()star*",
	"double\"quote<less>greater|pipe",
	"brackets[]{}^`",
	".hidden/..dots/...",
	"-dash/_under/=eq",
}

func testSpecialKeys(t *testing.T, st Store) {
	for i, k := range specialKeys {
		if err := ValidateKey(k); err != nil {
			t.Fatalf("ValidateKey(%q): %v", k, err)
		}
		put(t, st, k, []byte(fmt.Sprint("value ", i)))
	}
	for i, k := range specialKeys {
		wantContent(t, st, k, []byte(fmt.Sprint("value ", i)))
		if info, err := st.Stat(t.Context(), k); err != nil || info.Key != k {
			t.Errorf("Stat(%q) = %+v, %v", k, info, err)
		}
	}
	want := slices.Sorted(slices.Values(specialKeys))
	if got := keys(t, st, ""); !slices.Equal(got, want) {
		t.Errorf("List = %q\nwant %q", got, want)
	}
	if got := keys(t, st, "ümlaut/日本"); !slices.Equal(got, []string{"ümlaut/日本語/emoji-🚀"}) {
		t.Errorf("List(ümlaut/日本) = %q", got)
	}
	if got := keys(t, st, "query?"); !slices.Equal(got, []string{"query?x=1&y=2#frag"}) {
		t.Errorf("List(query?) = %q", got)
	}
	for _, k := range specialKeys {
		if err := st.Delete(t.Context(), k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
	if got := keys(t, st, ""); len(got) != 0 {
		t.Errorf("List after Delete = %q", got)
	}
}

var invalidKeys = []string{
	"", "/abs", "a//b", "a/", "/", "../x", "a/../b", "a/..", "./a", "a/./b", ".", "..",
	"back\\slash", "ctl\x01", "tab\tkey", "del\x7f", "bad\xffutf8", "nul\x00",
	strings.Repeat("k", MaxKeyLen+1),
	strings.Repeat("s", MaxSegmentLen+1) + "/x",
	".eddy-tmp-123", "a/.eddy-tmpX",
}

func testInvalidKeys(t *testing.T, st Store) {
	ctx := t.Context()
	for _, k := range invalidKeys {
		if err := st.Put(ctx, k, strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) error = %v, want ErrInvalidKey", k, err)
		}
		if _, err := st.Get(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) error = %v, want ErrInvalidKey", k, err)
		}
		if _, err := st.Stat(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Stat(%q) error = %v, want ErrInvalidKey", k, err)
		}
		if err := st.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) error = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, p := range []string{"/abs", "a//", "../", "a/../", "ctl\x01", ".eddy-tmp"} {
		if _, err := st.List(ctx, p); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("List(%q) error = %v, want ErrInvalidKey", p, err)
		}
	}
	for _, p := range []string{"", "a", "a/", "a/.", "a/..", "a/b"} { // a partial last segment may be anything
		if _, err := st.List(ctx, p); err != nil {
			t.Errorf("List(%q): %v", p, err)
		}
	}
	if got := keys(t, st, ""); len(got) != 0 {
		t.Errorf("invalid keys stored something: %q", got)
	}
}

func testContent(t *testing.T, st Store) {
	ctx := t.Context()
	const prefix = "tenants/acme/modules"
	wasm := []byte("\x00asm\x01\x00\x00\x00 a module")
	sha, err := PutContent(ctx, st, prefix, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256(wasm)); sha != want {
		t.Fatalf("PutContent = %s, want %s", sha, want)
	}
	key := prefix + "/" + sha
	if ContentKey(prefix+"/", sha) != key || ContentKey("", sha) != sha {
		t.Fatalf("ContentKey disagrees with PutContent's key %s", key)
	}
	info1, err := st.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := GetContent(ctx, st, prefix, sha)
	if err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("GetContent = %q, %v", got, err)
	}

	// Storing it again changes nothing.
	if sha2, err := PutContent(ctx, st, prefix, wasm); err != nil || sha2 != sha {
		t.Fatalf("second PutContent = %s, %v", sha2, err)
	}
	if info2, err := st.Stat(ctx, key); err != nil || !info2.Modified.Equal(info1.Modified) {
		t.Fatalf("second PutContent rewrote the blob: %+v then %+v (%v)", info1, info2, err)
	}

	// A flipped byte is detected.
	bad := slices.Clone(wasm)
	bad[len(bad)-1] ^= 1
	put(t, st, key, bad)
	if _, err := GetContent(ctx, st, prefix, sha); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetContent of a corrupted blob: error %v, want ErrCorrupt", err)
	} else if !strings.Contains(err.Error(), key) {
		t.Errorf("error %q does not name the key", err)
	}
	// A truncated blob is replaced by the next PutContent.
	put(t, st, key, wasm[:3])
	if _, err := GetContent(ctx, st, prefix, sha); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("GetContent of a truncated blob: error %v, want ErrCorrupt", err)
	}
	if _, err := PutContent(ctx, st, prefix, wasm); err != nil {
		t.Fatal(err)
	}
	if got, err := GetContent(ctx, st, prefix, sha); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("GetContent after repair = %q, %v", got, err)
	}

	other := fmt.Sprintf("%x", sha256.Sum256([]byte("never stored")))
	if _, err := GetContent(ctx, st, prefix, other); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetContent of a missing blob: error %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "abc", strings.ToUpper(sha), sha[:63] + "g", "../" + sha[3:]} {
		if _, err := GetContent(ctx, st, prefix, bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("GetContent(%q): error %v, want ErrInvalidKey", bad, err)
		}
	}
}

func testContextCanceled(t *testing.T, st Store) {
	put(t, st, "k", []byte("v"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := st.Put(ctx, "k2", strings.NewReader("v"), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Put: %v", err)
	}
	if _, err := st.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if _, err := st.Stat(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat: %v", err)
	}
	if _, err := st.List(ctx, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List: %v", err)
	}
	if err := st.Delete(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete: %v", err)
	}
	wantContent(t, st, "k", []byte("v"))

	// Canceled in the middle of a large upload: nothing is stored.
	ctx, cancel = context.WithCancel(t.Context())
	r := &cancelingReader{r: bytes.NewReader(randomBytes(2 * testPartSize)), after: testPartSize + 1, cancel: cancel}
	if err := st.Put(ctx, "k3", r, -1); err == nil {
		t.Fatal("Put with a context canceled midway succeeded")
	}
	wantNotFound(t, st, "k3")
}

// cancelingReader cancels its context once it has yielded after bytes.
type cancelingReader struct {
	r      io.Reader
	after  int
	cancel func()
}

func (c *cancelingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.after -= n; c.after <= 0 {
		c.cancel()
	}
	return n, err
}

func testClosed(t *testing.T, st Store) {
	put(t, st, "k", []byte("v"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := st.Put(ctx, "k", strings.NewReader("v"), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := st.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := st.Stat(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Stat after Close: %v", err)
	}
	if _, err := st.List(ctx, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if err := st.Delete(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v", err)
	}
}

// testConcurrent hammers one store: writers put distinct keys and all
// overwrite one shared key while readers read it. Every read must see one
// whole version, never a mix or a part.
func testConcurrent(t *testing.T, st Store, writers, putsEach int) {
	ctx := t.Context()
	version := func(w, i int) []byte {
		// Distinct sizes and contents, each version self-describing.
		return bytes.Repeat(fmt.Appendf(nil, "w%02d-i%03d;", w, i), 50+w*7+i)
	}
	valid := map[string]bool{}
	for w := range writers {
		for i := range putsEach {
			valid[string(version(w, i))] = true
		}
	}
	put(t, st, "shared", version(0, 0))

	var wg sync.WaitGroup
	errs := make(chan error, writers*putsEach*4)
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range putsEach {
				v := version(w, i)
				if err := st.Put(ctx, fmt.Sprintf("w%02d/%03d", w, i), bytes.NewReader(v), int64(len(v))); err != nil {
					errs <- err
				}
				size := int64(len(v))
				if i%2 == 1 {
					size = -1
				}
				if err := st.Put(ctx, "shared", onlyReader{bytes.NewReader(v)}, size); err != nil {
					errs <- err
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rc, err := st.Get(ctx, "shared")
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					errs <- err
					return
				}
				if !valid[string(b)] {
					errs <- fmt.Errorf("read a torn version of shared: %d bytes starting %q", len(b), b[:min(len(b), 20)])
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for w := range writers {
		for i := range putsEach {
			wantContent(t, st, fmt.Sprintf("w%02d/%03d", w, i), version(w, i))
		}
	}
	if !valid[string(get(t, st, "shared"))] {
		t.Fatal("shared holds no whole version")
	}
	if got := len(keys(t, st, "")); got != writers*putsEach+1 {
		t.Fatalf("List: %d keys, want %d", got, writers*putsEach+1)
	}
}
