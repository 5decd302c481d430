package storage

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config holds the settings of the s3 store; the file store ignores it.
// Start from [DefaultConfig] or [ConfigFromEnv]; flags and YAML fill the
// same struct. Open validates it (after applying the URL's query) when it
// opens an s3:// URL.
type Config struct {
	// AccessKey and SecretKey are the static credentials. Both empty means
	// anonymous requests. Never put them in a URL (URLs end up in logs).
	AccessKey string
	SecretKey string

	// Endpoint is the server's host[:port], without a scheme; an s3:// URL's
	// ?endpoint= overrides it. The default is AWS (s3.amazonaws.com).
	Endpoint string
	// UseTLS selects https; an s3:// URL's ?tls= overrides it.
	UseTLS bool
	// Region is sent in signatures and used when creating the bucket.
	Region string
	// PathStyle forces path-style requests (http://host/bucket/key). When
	// false, minio-go picks virtual-host style for AWS and GCS endpoints and
	// path style for every other S3-compatible server.
	PathStyle bool
	// CreateBucket makes Open create the bucket if it does not exist;
	// otherwise a missing bucket is an error from Open.
	CreateBucket bool

	// PartSize is the size of each part of a multipart upload, and the
	// memory Put buffers for an object of unknown size. S3 requires at
	// least 5 MiB.
	PartSize uint64
	// MaxRetries bounds the attempts of one request against a failing or
	// unreachable server (1 = no retry); with the backoff of minio-go (200
	// ms doubling, capped at 1 s) 3 attempts give up after about a second.
	MaxRetries int
	// DialTimeout bounds connecting to the server, and
	// ResponseHeaderTimeout waiting for its answer once a request is sent,
	// so that a server that hangs rather than refuses is also reported
	// unavailable.
	DialTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
}

// Minimum part size of S3 multipart uploads.
const minPartSize = 5 << 20

// DefaultConfig returns the configuration Open assumes: the AWS endpoint
// over TLS in us-east-1, no credentials, 16 MiB parts, 3 attempts per
// request, 5 s to connect and 60 s to answer.
func DefaultConfig() Config {
	return Config{
		Endpoint:              "s3.amazonaws.com",
		UseTLS:                true,
		Region:                "us-east-1",
		PartSize:              16 << 20,
		MaxRetries:            3,
		DialTimeout:           5 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
}

// Environment variables read by ConfigFromEnv.
const (
	EnvAccessKey = "EDDY_S3_ACCESS_KEY"
	EnvSecretKey = "EDDY_S3_SECRET_KEY"
	EnvEndpoint  = "EDDY_S3_ENDPOINT"
	EnvTLS       = "EDDY_S3_TLS"
	EnvRegion    = "EDDY_S3_REGION"
)

// ConfigFromEnv returns DefaultConfig with the fields whose environment
// variable is set and not empty replaced: EDDY_S3_ACCESS_KEY,
// EDDY_S3_SECRET_KEY, EDDY_S3_ENDPOINT (host:port), EDDY_S3_TLS (true or
// false) and EDDY_S3_REGION. It fails only on a value it cannot parse.
func ConfigFromEnv() (Config, error) {
	cfg := DefaultConfig()
	if v := os.Getenv(EnvAccessKey); v != "" {
		cfg.AccessKey = v
	}
	if v := os.Getenv(EnvSecretKey); v != "" {
		cfg.SecretKey = v
	}
	if v := os.Getenv(EnvEndpoint); v != "" {
		cfg.Endpoint = v
	}
	if v := os.Getenv(EnvRegion); v != "" {
		cfg.Region = v
	}
	if v := os.Getenv(EnvTLS); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, invalid("%s=%q: want true or false", EnvTLS, v)
		}
		cfg.UseTLS = b
	}
	return cfg, nil
}

// ErrInvalidConfig is matched by the errors of Validate, ConfigFromEnv and
// of Open for a URL it cannot use.
var ErrInvalidConfig = errors.New("storage: invalid config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// Validate reports the first setting that cannot work, as an error matching
// ErrInvalidConfig.
func (c Config) Validate() error {
	if err := c.validate(); err != nil {
		return invalid("%v", err)
	}
	return nil
}

func (c Config) validate() error {
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return errors.New("access key and secret key must be set together")
	}
	if err := checkEndpoint(c.Endpoint); err != nil {
		return err
	}
	if c.PartSize < minPartSize {
		return fmt.Errorf("part size %d is below the S3 minimum of 5 MiB", c.PartSize)
	}
	if c.MaxRetries < 1 {
		return fmt.Errorf("max retries %d: want at least 1 (one attempt)", c.MaxRetries)
	}
	if c.DialTimeout < 0 || c.ResponseHeaderTimeout < 0 {
		return errors.New("negative timeout")
	}
	return nil
}

// checkEndpoint accepts host or host:port, the form minio-go wants.
func checkEndpoint(ep string) error {
	switch {
	case ep == "":
		return errors.New("s3 endpoint is empty (set EDDY_S3_ENDPOINT or ?endpoint=host:port)")
	case strings.Contains(ep, "://"):
		return fmt.Errorf("s3 endpoint %q: give host:port without a scheme, and tls=false for http", ep)
	case strings.ContainsAny(ep, "/?# "):
		return fmt.Errorf("s3 endpoint %q: want host or host:port", ep)
	}
	return nil
}
