package raftnode

import (
	"errors"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	for name, d := range map[string]time.Duration{
		"heartbeat": c.HeartbeatTimeout, "election": c.ElectionTimeout, "leader lease": c.LeaderLeaseTimeout,
	} {
		if d < 500*time.Millisecond {
			t.Errorf("default %s timeout %s, want >= 500ms for loaded machines", name, d)
		}
	}
	if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("default config without ID validates: %v", err)
	}
	c.ID, c.DataDir = "c1", t.TempDir()
	if err := c.Validate(); err != nil {
		t.Errorf("default config with ID and data dir: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"valid", func(*Config) {}, true},
		{"port 0", func(c *Config) { c.BindAddr = "127.0.0.1:0" }, true},
		{"wildcard with advertise", func(c *Config) { c.BindAddr = "0.0.0.0:7001"; c.AdvertiseAddr = "10.1.2.3:7001" }, true},
		{"no id", func(c *Config) { c.ID = "" }, false},
		{"no data dir", func(c *Config) { c.DataDir = "" }, false},
		{"no port", func(c *Config) { c.BindAddr = "127.0.0.1" }, false},
		{"bad port", func(c *Config) { c.BindAddr = "127.0.0.1:99999" }, false},
		{"host name", func(c *Config) { c.BindAddr = "localhost:7001" }, false},
		{"wildcard without advertise", func(c *Config) { c.BindAddr = "0.0.0.0:7001" }, false},
		{"advertise wildcard", func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7001" }, false},
		{"advertise port 0", func(c *Config) { c.AdvertiseAddr = "10.1.2.3:0" }, false},
		{"advertise with bind port 0", func(c *Config) { c.BindAddr = "0.0.0.0:0"; c.AdvertiseAddr = "10.1.2.3:7001" }, false},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout }, false},
		{"election below heartbeat", func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 }, false},
		{"zero heartbeat", func(c *Config) { c.HeartbeatTimeout = 0 }, false},
		{"zero commit timeout", func(c *Config) { c.CommitTimeout = 0 }, false},
		{"zero apply timeout", func(c *Config) { c.ApplyTimeout = 0 }, false},
		{"no snapshots kept", func(c *Config) { c.SnapshotRetain = 0 }, false},
		{"zero snapshot threshold", func(c *Config) { c.SnapshotThreshold = 0 }, false},
		{"no pool", func(c *Config) { c.MaxPool = 0 }, false},
		{"tiny WAL segments", func(c *Config) { c.WALSegmentSize = 1024 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ID, c.DataDir = "c1", "/var/lib/eddy/raft"
			tc.edit(&c)
			err := c.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestStartRefusesInvalidConfig(t *testing.T) {
	c := DefaultConfig()
	c.ID = "c1"
	if _, err := Start(c, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Start: %v", err)
	}
}
