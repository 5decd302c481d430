package storage

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// s3Store keeps each object as bucket/prefix/key on an S3-compatible server.
type s3Store struct {
	client    *minio.Client
	core      minio.Core // the same client, for its single-request GetObject
	transport *http.Transport
	bucket    string
	prefix    string // "" or ends with "/"
	endpoint  string
	partSize  uint64
	closed    atomic.Bool
}

func openS3(ctx context.Context, bucket, prefix string, cfg Config) (*s3Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return nil, invalid("bucket %q: %v", bucket, err)
	}
	tr, err := minio.DefaultTransport(cfg.UseTLS)
	if err != nil {
		return nil, err
	}
	tr.DialContext = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = cfg.ResponseHeaderTimeout
	creds := credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
	if cfg.AccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       cfg.UseTLS,
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   cfg.MaxRetries,
	})
	if err != nil {
		return nil, err
	}
	s := &s3Store{
		client:    client,
		core:      minio.Core{Client: client},
		transport: tr,
		bucket:    bucket,
		endpoint:  cfg.Endpoint,
		partSize:  cfg.PartSize,
	}
	if prefix != "" {
		s.prefix = prefix + "/"
	}
	if err := s.ensureBucket(ctx, cfg); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

func (s *s3Store) ensureBucket(ctx context.Context, cfg Config) error {
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.mapErr(ctx, "check bucket", s.bucket, err)
	}
	if ok {
		return nil
	}
	if !cfg.CreateBucket {
		return fmt.Errorf("bucket %q does not exist at %s (create it, or set CreateBucket)", s.bucket, s.endpoint)
	}
	err = s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: cfg.Region})
	switch minio.ToErrorResponse(err).Code {
	case "BucketAlreadyOwnedByYou", "BucketAlreadyExists": // a concurrent Open made it
		return nil
	}
	return s.mapErr(ctx, "create bucket", s.bucket, err)
}

func (s *s3Store) String() string {
	return fmt.Sprintf("s3://%s/%s (%s)", s.bucket, strings.TrimSuffix(s.prefix, "/"), s.endpoint)
}

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := precheck(ctx, &s.closed, "put", key); err != nil {
		return err
	}
	body, size, err := s.body(r, size)
	if err != nil {
		return opError("put", key, err)
	}
	_, err = s.client.PutObject(ctx, s.bucket, s.prefix+key, body, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    s.partSize,
		// Over plain http minio-go signs the payload in chunks. For an empty
		// object versitygw leaves the final chunk unread, and the next
		// request on that keep-alive connection fails with 400 BadRequest;
		// an empty payload has nothing to protect, so it goes unsigned.
		DisableContentSha256: size == 0,
	})
	return s.mapErr(ctx, "put", key, err)
}

// body turns r into what PutObject needs. minio-go retries a request only
// if its body can seek back, so an object that fits in one part is read
// into a buffer first (and one of unknown size becomes a single PUT rather
// than a multipart upload); larger ones stream, minio-go buffering each
// part. Errors of r are marked as such so that they are not taken for
// errors of the server.
func (s *s3Store) body(r io.Reader, size int64) (io.Reader, int64, error) {
	src := &sourceReader{r: r}
	if size >= 0 {
		if uint64(size) > s.partSize {
			return &exactReader{r: src, left: size, size: size}, size, nil
		}
		buf := make([]byte, size)
		if n, err := io.ReadFull(src, buf); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil, 0, shortRead(int64(n), size)
			}
			return nil, 0, err
		}
		return bytes.NewReader(buf), size, nil
	}
	buf := make([]byte, s.partSize)
	n, err := io.ReadFull(src, buf)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return bytes.NewReader(buf[:n]), int64(n), nil
	case nil:
		return io.MultiReader(bytes.NewReader(buf), src), -1, nil
	default:
		return nil, 0, err
	}
}

func (s *s3Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := precheck(ctx, &s.closed, "get", key); err != nil {
		return nil, err
	}
	// One GET whose body is streamed: the lazy minio.Object would issue
	// further ranged requests pinned to the first ETag, which fail once the
	// object is replaced.
	body, _, _, err := s.core.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.mapErr(ctx, "get", key, err)
	}
	return &s3Reader{body: body, store: s, ctx: ctx, key: key}, nil
}

// s3Reader maps the errors of reading an object like those of the calls.
type s3Reader struct {
	body  io.ReadCloser
	store *s3Store
	ctx   context.Context
	key   string
}

func (r *s3Reader) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		err = r.store.mapErr(r.ctx, "read", r.key, err)
	}
	return n, err
}

func (r *s3Reader) Close() error { return r.body.Close() }

func (s *s3Store) Stat(ctx context.Context, key string) (Info, error) {
	if err := precheck(ctx, &s.closed, "stat", key); err != nil {
		return Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.mapErr(ctx, "stat", key, err)
	}
	return Info{Key: key, Size: oi.Size, Modified: oi.LastModified}, nil
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := precheck(ctx, &s.closed, "delete", key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if err = s.mapErr(ctx, "delete", key, err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (s *s3Store) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := precheckPrefix(ctx, &s.closed, prefix); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx) // stops minio-go's lister if we return early
	defer cancel()
	var out []Info
	for oi := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if oi.Err != nil {
			return nil, s.mapErr(ctx, "list", "prefix "+strconv.Quote(prefix), oi.Err)
		}
		key, ok := strings.CutPrefix(oi.Key, s.prefix)
		if !ok || key == "" || strings.HasSuffix(key, "/") { // directory markers are no objects
			continue
		}
		out = append(out, Info{Key: key, Size: oi.Size, Modified: oi.LastModified})
	}
	// S3 lists in byte order; not every S3-compatible server does.
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *s3Store) Close() error {
	s.closed.Store(true)
	s.transport.CloseIdleConnections()
	return nil
}

// mapErr turns a minio-go error of operation op on key into the package's
// errors: a missing object into ErrNotFound, an unreachable or overloaded
// server into ErrUnavailable.
func (s *s3Store) mapErr(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return opError(op, key, ctx.Err())
	}
	var srcErr *sourceError
	if errors.As(err, &srcErr) {
		return opError(op, key, srcErr)
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == "NoSuchKey":
		return notFound(key)
	case resp.Code == "NoSuchBucket":
		return fmt.Errorf("storage: %s %s: bucket %q does not exist at %s", op, key, s.bucket, s.endpoint)
	case resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusGatewayTimeout, resp.Code == "SlowDown", resp.Code == "ServiceUnavailable":
		return fmt.Errorf("%w: %s %s: s3 %s: %w", ErrUnavailable, op, key, s.endpoint, err)
	case isUnreachable(err):
		return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, key, err)
	case resp.Code != "":
		return fmt.Errorf("storage: %s %s: s3 %s: %s (%s)", op, key, s.endpoint, resp.Error(), resp.Code)
	}
	return opError(op, key, err)
}

// isUnreachable reports whether err means that the server could not be
// talked to: refused or dropped connections, time-outs, DNS failures.
// Certificate errors are configuration mistakes and not included.
func isUnreachable(err error) bool {
	var (
		certErr   *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	if errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid) {
		return false
	}
	var (
		urlErr *url.Error
		opErr  *net.OpError
		dnsErr *net.DNSError
		netErr net.Error
	)
	switch {
	case errors.As(err, &urlErr), errors.As(err, &opErr), errors.As(err, &dnsErr):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// exactReader passes on exactly size bytes of r and fails if r ends
// sooner, so that a short reader fails the upload instead of storing a
// short object.
type exactReader struct {
	r          io.Reader
	left, size int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		err = shortRead(e.size-e.left, e.size)
	}
	if err == nil && e.left == 0 {
		err = io.EOF
	}
	return n, err
}
