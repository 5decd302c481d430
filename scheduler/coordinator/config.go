package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/auth"
	"github.com/eddy-stream/eddy/scheduler/raftnode"
)

// ErrInvalidConfig is matched by the errors of Config.Validate and of New.
var ErrInvalidConfig = errors.New("coordinator: invalid config")

// Config configures one coordinator process. Start from DefaultConfig;
// flags and YAML fill the same struct.
type Config struct {
	// NodeID names this coordinator in the Raft group: unique in the group,
	// stable across restarts. Raft.ID is set from it (or must equal it).
	NodeID string
	// APIAddr is where the gRPC server (Control, Cluster, health,
	// reflection) listens, "host:port"; port 0 picks a free one (see
	// Coordinator.Addr).
	APIAddr string
	// APIAdvertiseAddr is the address other coordinators, workers and
	// clients dial, if not APIAddr. When empty and APIAddr's host is a
	// wildcard (":7700", "0.0.0.0:7700"), the host of the Raft address is
	// advertised with APIAddr's port.
	APIAdvertiseAddr string
	// Raft configures the Raft member: data directory, bind address,
	// Bootstrap (exactly one member of a new group bootstraps).
	Raft raftnode.Config
	// Join is the API address of an existing member. A coordinator with
	// Join asks that member (Control.Join, forwarded to the leader) to add
	// it as a voter when it starts. Joining again is harmless, so a
	// restarted member may keep the flag. Join and Raft.Bootstrap exclude
	// each other.
	Join string
	// JoinTimeout bounds how long Start keeps retrying the join.
	JoinTimeout time.Duration
	// JoinToken is an admin token of the group, which Join needs (when
	// the group's members do not authenticate each other by certificate).
	JoinToken string
	// AdminTokenFile is where the member that starts a new cluster writes
	// its first admin token (mode 0600); empty: it makes none, and the
	// cluster has no token until one is created some other way.
	AdminTokenFile string
	// BootstrapToken, when set, is the first admin token instead of a
	// random one (an operator's own secret, or a test's): the wire form
	// "eddy_<id>_<secret>" that package auth parses.
	BootstrapToken string

	// HeartbeatInterval is how often workers are told to heartbeat.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long the leader waits for a worker's
	// heartbeat before it declares the worker lost and restarts its jobs
	// elsewhere. Workers are told it too: one that cannot complete a
	// heartbeat for this long cancels its tasks itself.
	HeartbeatTimeout time.Duration

	// Restart is how failed jobs are restarted.
	Restart RestartStrategy

	// CheckpointStorage is the URL of the checkpoint storage of jobs whose
	// spec names none (file:///dir or s3://bucket/prefix; see package
	// storage). Every coordinator of a group and every worker must reach
	// the same storage under this URL. Empty: the directory checkpoints in
	// Raft.DataDir, which suits a group of one with workers on the same
	// machine.
	CheckpointStorage string

	// Logger receives the coordinator's logs (and Raft's, unless
	// Raft.Logger is set); nil means slog.Default().
	Logger *slog.Logger

	// TLS are the coordinator's credentials (nil: plaintext). The API
	// serves TLS and verifies a client certificate when one is given;
	// the Cluster service, Join and Leave refuse callers without one of
	// the cluster CA (CLI users present none). Other coordinators and
	// workers are dialled with them, and Raft.TLS is set from them.
	TLS *rpc.Credentials
}

// RestartKind names a restart strategy.
type RestartKind string

// Restart strategies, as Flink names them.
const (
	// RestartFixed waits Delay before every new attempt.
	RestartFixed RestartKind = "fixed"
	// RestartExponential waits Delay before the first restart and doubles
	// the wait at every further one, up to MaxDelay.
	RestartExponential RestartKind = "exponential"
	// RestartNone fails a job at its first failure.
	RestartNone RestartKind = "none"
)

// RestartStrategy says when a job whose task or worker failed runs again,
// and when it is failed for good.
type RestartStrategy struct {
	Kind     RestartKind
	Delay    time.Duration
	MaxDelay time.Duration // exponential only
	// MaxAttempts is how many times a job is restarted; at the next failure
	// it is FAILED with the failure's cause. 0 means no limit.
	MaxAttempts int
}

// DefaultRestartStrategy is the default: exponential from 1s to 1m, at most
// 10 restarts.
func DefaultRestartStrategy() RestartStrategy {
	return RestartStrategy{Kind: RestartExponential, Delay: time.Second, MaxDelay: time.Minute, MaxAttempts: 10}
}

// DefaultAPIAddr is the gRPC address of a coordinator not told otherwise.
const DefaultAPIAddr = "127.0.0.1:7700"

// DefaultConfig returns a configuration with every setting but NodeID and
// Raft.DataDir filled in.
func DefaultConfig() Config {
	return Config{
		APIAddr:           DefaultAPIAddr,
		Raft:              raftnode.DefaultConfig(),
		JoinTimeout:       time.Minute,
		HeartbeatInterval: time.Second,
		HeartbeatTimeout:  5 * time.Second,
		Restart:           DefaultRestartStrategy(),
	}
}

// Validate reports the first setting that cannot work, as an error matching
// ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.NodeID == "" {
		return bad("no node ID")
	}
	if c.BootstrapToken != "" {
		if _, err := auth.Parse(c.BootstrapToken); err != nil {
			return bad("bootstrap token: %v", err)
		}
	}
	if c.Raft.ID != "" && c.Raft.ID != c.NodeID {
		return bad("raft ID %q differs from node ID %q", c.Raft.ID, c.NodeID)
	}
	rc := c.Raft
	rc.ID = c.NodeID
	if err := rc.Validate(); err != nil {
		return fmt.Errorf("%w: raft: %w", ErrInvalidConfig, err)
	}
	if _, _, err := splitHostPort(c.APIAddr); err != nil {
		return bad("API address %q: %v", c.APIAddr, err)
	}
	if c.APIAdvertiseAddr != "" {
		host, port, err := splitHostPort(c.APIAdvertiseAddr)
		if err != nil || host == "" || port == 0 {
			return bad("API advertise address %q: want host:port", c.APIAdvertiseAddr)
		}
	}
	if c.Join != "" {
		if c.Raft.Bootstrap {
			return bad("join %s and bootstrap: a member either starts a group or joins one", c.Join)
		}
		if _, port, err := splitHostPort(c.Join); err != nil || port == 0 {
			return bad("join address %q: want host:port", c.Join)
		}
		if c.JoinTimeout <= 0 {
			return bad("join timeout %s not positive", c.JoinTimeout)
		}
	}
	if u := c.CheckpointStorage; u != "" && strings.Contains(u, "://") && !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "s3://") {
		return bad("checkpoint storage %q: want file:///dir or s3://bucket/prefix", u)
	}
	switch {
	case c.HeartbeatInterval <= 0:
		return bad("heartbeat interval %s not positive", c.HeartbeatInterval)
	case c.HeartbeatTimeout < 2*c.HeartbeatInterval:
		return bad("heartbeat timeout %s shorter than two heartbeat intervals (%s)", c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	return c.Restart.validate()
}

func (r RestartStrategy) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: restart strategy: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch r.Kind {
	case RestartFixed, RestartNone:
	case RestartExponential:
		if r.MaxDelay < r.Delay {
			return bad("max delay %s shorter than delay %s", r.MaxDelay, r.Delay)
		}
	default:
		return bad("kind %q, want %s, %s or %s", r.Kind, RestartFixed, RestartExponential, RestartNone)
	}
	if r.Delay < 0 {
		return bad("delay %s negative", r.Delay)
	}
	if r.MaxAttempts < 0 {
		return bad("max attempts %d negative", r.MaxAttempts)
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

// checkpointStorage returns the default checkpoint storage URL.
func (c Config) checkpointStorage() (string, error) {
	if c.CheckpointStorage != "" {
		return c.CheckpointStorage, nil
	}
	dir, err := filepath.Abs(filepath.Join(c.Raft.DataDir, "checkpoints"))
	if err != nil {
		return "", fmt.Errorf("%w: checkpoint storage: %v", ErrInvalidConfig, err)
	}
	return "file://" + filepath.ToSlash(dir), nil
}

// advertised returns the API address to publish for the listener's actual
// address, following APIAdvertiseAddr's rules.
func (c Config) advertised(listenAddr, raftAddr string) string {
	if c.APIAdvertiseAddr != "" {
		return c.APIAdvertiseAddr
	}
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return listenAddr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if rh, _, err := net.SplitHostPort(raftAddr); err == nil {
			host = rh
		}
	}
	return net.JoinHostPort(host, port)
}
