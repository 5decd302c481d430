package raftnode

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// Config configures one member of the coordinator's Raft group. Start from
// DefaultConfig; flags and YAML fill the same struct.
type Config struct {
	// ID names this member in the group. It must be unique in the group and
	// stay the same across restarts (the log and snapshots are tied to it).
	ID string
	// BindAddr is the TCP address Raft listens on, "host:port". Port 0 picks
	// a free port (see Node.Addr); useful in tests only, since the other
	// members must be able to find a restarted node again.
	BindAddr string
	// AdvertiseAddr is the address the other members dial, if not BindAddr
	// (which must then not be a wildcard address such as 0.0.0.0).
	AdvertiseAddr string
	// DataDir holds the write-ahead log (DataDir/wal) and the snapshots
	// (DataDir/snapshots). A member restarted on the same DataDir resumes
	// where it stopped.
	DataDir string
	// Bootstrap makes this node a group of one with itself as the voter,
	// unless DataDir already holds Raft state. Exactly one member of a new
	// group bootstraps; the others join through the leader's AddVoter.
	Bootstrap bool

	// HeartbeatTimeout is how long a follower waits without hearing from
	// the leader before it stands for election; ElectionTimeout is how long
	// a candidate waits for votes. LeaderLeaseTimeout is how long a leader
	// stays leader without reaching a quorum. Raft randomises the first two
	// between the value and twice it. Keep all three at 500 ms or more on
	// loaded machines: shorter ones cause needless elections.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout bounds how long the leader waits before sending an
	// append even when there is nothing new, which bounds commit latency.
	CommitTimeout time.Duration

	// ApplyTimeout bounds Apply, AddVoter and the other proposals when the
	// caller's context has no deadline.
	ApplyTimeout time.Duration

	// SnapshotInterval is how often Raft checks whether to snapshot;
	// SnapshotThreshold the number of new log entries that makes it do so;
	// TrailingLogs the entries kept after a snapshot so that a slightly
	// lagging follower catches up from the log rather than a snapshot.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// SnapshotRetain is the number of snapshots kept on disk.
	SnapshotRetain int

	// MaxPool is the number of pooled connections per peer; TransportTimeout
	// bounds each network operation.
	MaxPool          int
	TransportTimeout time.Duration

	// WALSegmentSize is the size of each write-ahead log segment file
	// (preallocated on creation).
	WALSegmentSize int

	// TLS, when set, secures the transport with mutual TLS: the config
	// must present this member's certificate and require and verify the
	// peer's (ClientAuth, ClientCAs and RootCAs), as
	// rpc.Credentials.PeerConfig does. Nil: plain TCP.
	TLS *tls.Config

	// Logger receives Raft's and the WAL's logs, with a "component"
	// attribute; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultBindAddr is the Raft address of a coordinator not told otherwise.
const DefaultBindAddr = "127.0.0.1:7701"

// DefaultConfig returns a configuration with every setting but ID and
// DataDir filled in. Its timeouts are hashicorp/raft's defaults, which hold
// up on a loaded two-core machine.
func DefaultConfig() Config {
	return Config{
		BindAddr:           DefaultBindAddr,
		HeartbeatTimeout:   1000 * time.Millisecond,
		ElectionTimeout:    1000 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		ApplyTimeout:       10 * time.Second,
		SnapshotInterval:   2 * time.Minute,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		MaxPool:            3,
		TransportTimeout:   10 * time.Second,
		WALSegmentSize:     8 << 20,
	}
}

// Validate reports the first setting that cannot work, as an error matching
// ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.ID == "" {
		return bad("no ID")
	}
	if c.DataDir == "" {
		return bad("no data directory")
	}
	host, port, err := splitHostPort(c.BindAddr)
	if err != nil {
		return bad("bind address %q: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr == "" {
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return bad("bind address %q: want an IP address others can dial, or set an advertise address", c.BindAddr)
		}
	} else {
		ahost, aport, err := splitHostPort(c.AdvertiseAddr)
		if err != nil {
			return bad("advertise address %q: %v", c.AdvertiseAddr, err)
		}
		if ip := net.ParseIP(ahost); ip == nil || ip.IsUnspecified() || aport == 0 {
			return bad("advertise address %q: want an IP address and a port", c.AdvertiseAddr)
		}
		if port == 0 {
			return bad("bind address %q: a fixed port is needed with an advertise address", c.BindAddr)
		}
	}
	switch {
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return bad("heartbeat timeout %s too short", c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return bad("election timeout %s shorter than heartbeat timeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.LeaderLeaseTimeout < 5*time.Millisecond:
		return bad("leader lease timeout %s too short", c.LeaderLeaseTimeout)
	case c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("leader lease timeout %s longer than heartbeat timeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.CommitTimeout < time.Millisecond:
		return bad("commit timeout %s too short", c.CommitTimeout)
	case c.ApplyTimeout <= 0:
		return bad("apply timeout %s not positive", c.ApplyTimeout)
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("snapshot interval %s too short", c.SnapshotInterval)
	case c.SnapshotThreshold == 0:
		return bad("snapshot threshold 0")
	case c.SnapshotRetain < 1:
		return bad("snapshot retain %d, want at least 1", c.SnapshotRetain)
	case c.MaxPool < 1:
		return bad("max pool %d, want at least 1", c.MaxPool)
	case c.TransportTimeout <= 0:
		return bad("transport timeout %s not positive", c.TransportTimeout)
	case c.WALSegmentSize < 64<<10:
		return bad("WAL segment size %d, want at least 64 KiB", c.WALSegmentSize)
	}
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q", portText)
	}
	return host, port, nil
}
