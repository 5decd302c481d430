package storage

import (
	"context"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Open returns the Store that rawURL names:
//
//   - file:///abs/dir, or a plain path such as /var/lib/eddy or ./data (made
//     absolute against the working directory): a directory, created if
//     missing. cfg is not used and may be the zero Config.
//   - s3://bucket or s3://bucket/some/prefix: the bucket of an
//     S3-compatible server; keys are stored under the prefix. The query may
//     override cfg: ?endpoint=host:port, ?tls=true|false, ?region=NAME.
//     Open validates the result, and checks (or, with cfg.CreateBucket,
//     creates) the bucket, so an unreachable server, wrong credentials or
//     a missing bucket fail here.
func Open(ctx context.Context, rawURL string, cfg Config) (Store, error) {
	st, err := open(ctx, rawURL, cfg)
	if err != nil {
		return nil, &openError{url: redact(rawURL), err: err}
	}
	return st, nil
}

// openError reads "storage: open URL: cause" even when the cause is one of
// the package's errors, which start with "storage:" themselves.
type openError struct {
	url string
	err error
}

func (e *openError) Error() string {
	return "storage: open " + e.url + ": " + strings.TrimPrefix(e.err.Error(), "storage: ")
}

func (e *openError) Unwrap() error { return e.err }

func open(ctx context.Context, rawURL string, cfg Config) (Store, error) {
	if rawURL == "" {
		return nil, invalid("empty URL")
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "file" && u.Scheme != "s3") {
		if strings.Contains(rawURL, "://") {
			if err != nil {
				return nil, invalid("%v", err)
			}
			return nil, invalid("unsupported scheme %q (want file or s3)", u.Scheme)
		}
		return openFile(rawURL) // a plain path, even one with a colon in it
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, invalid("file URL with host %q: want file:///absolute/path", u.Host)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return nil, invalid("file URL takes no query or fragment")
		}
		if !filepath.IsAbs(u.Path) {
			return nil, invalid("file URL path %q is not absolute", u.Path)
		}
		return openFile(u.Path)
	default: // "s3"
		bucket, prefix, err := s3Location(u, &cfg)
		if err != nil {
			return nil, err
		}
		return openS3(ctx, bucket, prefix, cfg)
	}
}

// s3Location splits an s3:// URL into bucket and key prefix and applies its
// query to cfg.
func s3Location(u *url.URL, cfg *Config) (bucket, prefix string, err error) {
	if u.User != nil {
		return "", "", invalid("credentials do not belong in the URL; use %s and %s", EnvAccessKey, EnvSecretKey)
	}
	if u.Fragment != "" {
		return "", "", invalid("s3 URL takes no fragment")
	}
	bucket = u.Host
	if bucket == "" {
		return "", "", invalid("s3 URL without bucket: want s3://bucket/optional/prefix")
	}
	prefix = strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"), "/")
	if prefix != "" {
		if err := checkPath(prefix, false); err != nil {
			return "", "", invalid("key prefix %q: %s", prefix, err)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", invalid("query: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		v := q.Get(name)
		switch name {
		case "endpoint":
			cfg.Endpoint = v
		case "region":
			cfg.Region = v
		case "tls":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", "", invalid("tls=%q: want true or false", v)
			}
			cfg.UseTLS = b
		default:
			return "", "", invalid("unknown query parameter %q (want endpoint, tls or region)", name)
		}
	}
	return bucket, prefix, nil
}

// redact drops what must not reach a log from a URL that failed to open.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.User == nil {
		return rawURL
	}
	return u.Redacted()
}
