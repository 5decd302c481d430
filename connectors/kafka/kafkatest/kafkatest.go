// Package kafkatest runs cmd/eddy-kafka (a kfake-based Kafka-protocol
// broker) as its own process for tests: a real TCP broker on 127.0.0.1
// that a test can stop, kill and start again, optionally with SASL
// (Options.SASL) and TLS (Options.TLS). It is not for anything but tests
// (the broker has no replication).
//
// The broker keeps its state in a data directory (Options.DataDir, by
// default a t.TempDir()): a Stop/Start or Kill/Start cycle keeps the
// addresses, the topics, their records, committed offsets and finished
// transactions.
package kafkatest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options configures a broker.
type Options struct {
	// Brokers is the number of broker nodes (ports); 0 means 1.
	Brokers int
	// Topics to create: name → partitions.
	Topics map[string]int
	// AutoCreateTopics lets clients create unknown topics.
	AutoCreateTopics bool
	// ReadyTimeout bounds the wait for the READY line; 0 means 30 s.
	ReadyTimeout time.Duration
	// DataDir is where the broker keeps its state across restarts; ""
	// means a new t.TempDir(). Topics it already holds are kept as they
	// are, whatever Topics says.
	DataDir string
	// SyncWrites makes the broker fsync every write. Tests do not need it
	// to survive Kill (see Broker.Kill); it would matter only for a crash
	// of the machine.
	SyncWrites bool
	// SASL, when set, makes the broker require authentication with this user.
	SASL *SASL
	// TLS serves TLS with a certificate made for the test (for 127.0.0.1,
	// self-signed, ECDSA P-256, valid an hour); Broker.CAFile names its
	// PEM, which clients trust.
	TLS bool
}

// SASL is a user the broker knows; clients authenticate as it.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism, User, Password string
}

// Broker is a running (or stopped) eddy-kafka process.
type Broker struct {
	t     testing.TB
	opts  Options
	ports []int
	addrs []string
	// certFile (which is also the CA file: the certificate is
	// self-signed) and keyFile, with Options.TLS.
	certFile, keyFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/eddy-kafka once per test process and returns its path.
// EDDY_KAFKA_BIN, when set, names a prebuilt binary instead.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("EDDY_KAFKA_BIN"); p != "" {
			binPath = p
			return
		}
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("kafkatest: go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "eddy-kafka-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "eddy-kafka")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/eddy-kafka")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("kafkatest: building eddy-kafka: %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// Start builds and starts a broker on 127.0.0.1 ports that eddy-kafka binds
// itself (port 0: the kernel picks them; its READY line names them), with
// its data in opts.DataDir, and stops it when the test ends.
func Start(t testing.TB, opts Options) *Broker {
	t.Helper()
	n := opts.Brokers
	if n <= 0 {
		n = 1
	}
	if opts.DataDir == "" {
		// Before the Cleanup below, so that the broker stops before its
		// directory is removed.
		opts.DataDir = t.TempDir()
	}
	if u := opts.SASL; u != nil {
		// Checked here, as eddy-kafka would, rather than by retrying its
		// start until ReadyTimeout.
		switch u.Mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			t.Fatalf("kafkatest: SASL mechanism %q is none of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", u.Mechanism)
		}
		if u.User == "" || u.Password == "" || strings.Contains(u.User, ":") {
			t.Fatalf("kafkatest: SASL user %q: want a user without ':' and a password", u.User)
		}
	}
	b := &Broker{t: t, opts: opts}
	if opts.TLS {
		// Not in DataDir, which a test may share between brokers.
		dir := t.TempDir()
		b.certFile, b.keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if err := writeCertificate(b.certFile, b.keyFile, time.Hour); err != nil {
			t.Fatalf("kafkatest: %v", err)
		}
	}
	b.ports = make([]int, n) // 0 each until the first start binds them
	t.Cleanup(func() { b.Stop() })
	b.Start()
	return b
}

// Addrs returns the brokers' host:port addresses.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Bootstrap returns the addresses joined by commas (kcat's -b form).
func (b *Broker) Bootstrap() string { return strings.Join(b.addrs, ",") }

// CAFile returns the path of the PEM certificate clients trust to reach
// the broker with Options.TLS; "" without TLS. It stays the same across
// restarts.
func (b *Broker) CAFile() string { return b.certFile }

// Start (re)starts a stopped broker on the ports of its first start and
// the same data directory,
// with the state the last run left there. Starting a running broker is a
// no-op.
func (b *Broker) Start() {
	b.t.Helper()
	if err := b.start(); err != nil {
		b.t.Fatalf("kafkatest: %v", err)
	}
}

// TryStart is Start returning its error, for use outside the test's
// goroutine.
func (b *Broker) TryStart() error {
	if err := b.start(); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

func (b *Broker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return nil
	}
	bin, err := Binary()
	if err != nil {
		return err
	}
	ps := make([]string, len(b.ports))
	for i, p := range b.ports {
		ps[i] = strconv.Itoa(p)
	}
	args := []string{"--ports", strings.Join(ps, ","), "--data-dir", b.opts.DataDir}
	if b.opts.SyncWrites {
		args = append(args, "--sync-writes")
	}
	var ts []string
	for name, parts := range b.opts.Topics {
		ts = append(ts, fmt.Sprintf("%s:%d", name, parts))
	}
	if len(ts) > 0 {
		args = append(args, "--topics", strings.Join(ts, ","))
	}
	if b.opts.AutoCreateTopics {
		args = append(args, "--auto-create-topics")
	}
	if u := b.opts.SASL; u != nil {
		args = append(args, "--sasl", u.Mechanism+":"+u.User+":"+u.Password)
	}
	if b.opts.TLS {
		args = append(args, "--tls-cert", b.certFile, "--tls-key", b.keyFile)
	}
	timeout := b.opts.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// A restart binds the ports of the first start again, which may still
	// be held briefly after a Stop: retry until the deadline.
	deadline := time.Now().Add(timeout)
	for {
		addrs, cmd, done, err := launch(bin, args, time.Until(deadline))
		if err == nil {
			if err := b.bound(addrs); err != nil {
				cmd.Process.Kill()
				<-done
				return err
			}
			b.cmd, b.done, b.addrs = cmd, done, addrs
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func launch(bin string, args []string, timeout time.Duration) ([]string, *exec.Cmd, chan struct{}, error) {
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("starting eddy-kafka: %w", err)
	}
	done := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- line
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() { cmd.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case line := <-ready:
		return strings.Split(line, ","), cmd, done, nil
	case <-done:
		return nil, nil, nil, fmt.Errorf("eddy-kafka exited before READY: %s", cmd.Stderr.(*lockedWriter).String())
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return nil, nil, nil, fmt.Errorf("eddy-kafka not READY within %v", timeout)
	}
}

// Stop stops the broker (SIGTERM, then SIGKILL after 5 s) and waits for it
// to exit; the broker writes its state to the data directory on the way
// out, so a Start afterwards finds everything, including transactions that
// were still open (a client may go on to commit or abort them, unless
// their timeout passed meanwhile). Stopping a
// stopped broker is a no-op.
func (b *Broker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd, b.done = nil, nil
}

// Kill stops the broker with SIGKILL, as a crash would. Nothing
// acknowledged is lost, without SyncWrites too: the broker writes records,
// offset commits, producer ids and transaction markers to its data
// directory as it handles each request (write(2); fsync only with
// SyncWrites, which only a crash of the machine needs), and the kernel
// keeps what a killed process wrote. Transactions open at the kill are
// aborted by the next Start, which writes their abort markers (kfake alone
// would abort them in memory only, and read_committed clients would then
// skip the later transactions of the same transactional id), so
// read_committed readers never see their records. Killing a stopped
// broker is a no-op.
func (b *Broker) Kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Kill()
	<-b.done
	b.cmd, b.done = nil, nil
}

// AwaitDials stands in for the stopped broker until clients have tried to
// reach it n times: it listens on the broker's addresses, hangs up on each
// connection at once, and returns after the nth with its listeners closed
// again. A test calls it to wait until its clients retry against a broker
// that is down (and then Starts the broker while they do) rather than
// sleep for a while. It fails the test after a minute.
func (b *Broker) AwaitDials(t testing.TB, n int) {
	t.Helper()
	b.mu.Lock()
	running := b.cmd != nil
	b.mu.Unlock()
	if running {
		t.Fatal("kafkatest: AwaitDials: the broker is running")
	}
	dials := make(chan struct{}, n)
	var wg sync.WaitGroup
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
		wg.Wait()
	}()
	for _, a := range b.addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("kafkatest: AwaitDials: %v", err)
		}
		ls = append(ls, l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return // closed
				}
				c.Close()
				select {
				case dials <- struct{}{}:
				default:
				}
			}
		}()
	}
	timeout := time.After(time.Minute)
	for i := range n {
		select {
		case <-dials:
		case <-timeout:
			t.Fatalf("kafkatest: %d of %d connection attempts to the stopped broker within a minute", i, n)
		}
	}
}

// bound records the ports of the addresses a start's READY line named,
// which the restarts bind again: clients keep them as bootstrap addresses.
func (b *Broker) bound(addrs []string) error {
	if len(addrs) != len(b.ports) {
		return fmt.Errorf("eddy-kafka is READY on %d addresses, want %d: %v", len(addrs), len(b.ports), addrs)
	}
	for i, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("eddy-kafka READY on %q: %w", a, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || b.ports[i] != 0 && b.ports[i] != p {
			return fmt.Errorf("eddy-kafka READY on %s, want port %d", a, b.ports[i])
		}
		b.ports[i] = p
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// writeCertificate writes a new self-signed certificate for 127.0.0.1,
// valid for validFor, and its key to certFile and keyFile (PEM). The
// certificate is its own CA (IsCA), so that OpenSSL (kcat) takes it as a
// trust anchor as Go does; its IP address lets both verify the host name.
func writeCertificate(certFile, keyFile string, validFor time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kafkatest 127.0.0.1"},
		// A minute back for clocks a little behind.
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validFor),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certificate key: %w", err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}
