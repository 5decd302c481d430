package storage

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	for _, c := range []struct {
		name   string
		modify func(*Config)
		want   string // substring of the error; "" = valid
	}{
		{"anonymous", func(c *Config) {}, ""},
		{"static credentials", func(c *Config) { c.AccessKey, c.SecretKey = "a", "s" }, ""},
		{"host only", func(c *Config) { c.Endpoint = "minio.internal" }, ""},
		{"ipv6", func(c *Config) { c.Endpoint = "[::1]:9000" }, ""},
		{"access key alone", func(c *Config) { c.AccessKey = "a" }, "set together"},
		{"secret key alone", func(c *Config) { c.SecretKey = "s" }, "set together"},
		{"no endpoint", func(c *Config) { c.Endpoint = "" }, "endpoint is empty"},
		{"endpoint with scheme", func(c *Config) { c.Endpoint = "http://127.0.0.1:9000" }, "without a scheme"},
		{"endpoint with path", func(c *Config) { c.Endpoint = "host/path" }, "host:port"},
		{"part too small", func(c *Config) { c.PartSize = 1 << 20 }, "5 MiB"},
		{"no attempts", func(c *Config) { c.MaxRetries = 0 }, "at least 1"},
		{"negative timeout", func(c *Config) { c.DialTimeout = -1 }, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.modify(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.want)
			case err != nil && !errors.Is(err, ErrInvalidConfig):
				t.Fatalf("Validate() = %q, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	for _, k := range []string{EnvAccessKey, EnvSecretKey, EnvEndpoint, EnvTLS, EnvRegion} {
		t.Setenv(k, "")
	}
	cfg, err := ConfigFromEnv()
	if err != nil || cfg != DefaultConfig() {
		t.Fatalf("ConfigFromEnv with nothing set = %+v, %v; want DefaultConfig", cfg, err)
	}
	t.Setenv(EnvAccessKey, "AK")
	t.Setenv(EnvSecretKey, "SK")
	t.Setenv(EnvEndpoint, "127.0.0.1:7070")
	t.Setenv(EnvTLS, "false")
	t.Setenv(EnvRegion, "eu-west-1")
	cfg, err = ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.AccessKey, want.SecretKey, want.Endpoint, want.UseTLS, want.Region = "AK", "SK", "127.0.0.1:7070", false, "eu-west-1"
	if cfg != want {
		t.Fatalf("ConfigFromEnv = %+v, want %+v", cfg, want)
	}
	t.Setenv(EnvTLS, "nope")
	if _, err := ConfigFromEnv(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), EnvTLS) {
		t.Fatalf("ConfigFromEnv with %s=nope: %v", EnvTLS, err)
	}
}

func TestS3Location(t *testing.T) {
	for _, c := range []struct {
		url              string
		bucket, prefix   string
		endpoint, region string
		tls              bool
		err              string
	}{
		{url: "s3://b", bucket: "b", endpoint: "s3.amazonaws.com", region: "us-east-1", tls: true},
		{url: "s3://b/", bucket: "b", endpoint: "s3.amazonaws.com", region: "us-east-1", tls: true},
		{url: "s3://b/p/q/", bucket: "b", prefix: "p/q", endpoint: "s3.amazonaws.com", region: "us-east-1", tls: true},
		{url: "s3://b/p?endpoint=127.0.0.1:7070&tls=false", bucket: "b", prefix: "p", endpoint: "127.0.0.1:7070", region: "us-east-1"},
		{url: "s3://b?region=eu-west-3&tls=1", bucket: "b", endpoint: "s3.amazonaws.com", region: "eu-west-3", tls: true},
		{url: "s3://b/with%20space", bucket: "b", prefix: "with space", endpoint: "s3.amazonaws.com", region: "us-east-1", tls: true},
		{url: "s3:///p", err: "without bucket"},
		{url: "s3://b/a//c", err: "empty segment"},
		{url: "s3://b/../c", err: `".." segment`},
		{url: "s3://b?endpont=x", err: "unknown query parameter"},
		{url: "s3://b?tls=perhaps", err: "tls="},
		{url: "s3://k:s@b", err: "credentials do not belong"},
		{url: "s3://b#frag", err: "fragment"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		bucket, prefix, err := s3Location(u, &cfg)
		if c.err != "" {
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.url, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if bucket != c.bucket || prefix != c.prefix || cfg.Endpoint != c.endpoint || cfg.Region != c.region || cfg.UseTLS != c.tls {
			t.Errorf("%s: bucket %q prefix %q endpoint %q region %q tls %v", c.url, bucket, prefix, cfg.Endpoint, cfg.Region, cfg.UseTLS)
		}
	}
}

func TestValidateKey(t *testing.T) {
	for _, k := range append([]string{"a", "a/b/c", "tenants/t1/modules/" + strings.Repeat("f", 64),
		strings.Repeat("k", MaxSegmentLen), strings.Repeat("k/", MaxKeyLen/2-1) + "kk"}, specialKeys...) {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v", k, err)
		}
	}
	for _, k := range invalidKeys {
		err := ValidateKey(k)
		if err == nil {
			t.Errorf("ValidateKey(%q) = nil", k)
		} else if !strings.HasPrefix(err.Error(), "storage: invalid key: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ValidateKey(%q) = %q: want one line with the sentinel's prefix", k, err)
		}
	}
}
