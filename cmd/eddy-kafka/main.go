// Command eddy-kafka is a Kafka-protocol broker for tests and local use,
// built on franz-go's pkg/kfake. It is not a Kafka cluster: one process,
// no replication.
//
//	eddy-kafka --ports 9092,9093,9094 --topics payments:4,alerts:1 [--data-dir DIR]
//	           [--sasl MECHANISM:USER:PASSWORD ...] [--tls-cert FILE --tls-key FILE]
//
// It listens on the given 127.0.0.1 ports (one broker node per port; 0
// lets the kernel pick one), prints "READY addr,addr,..." with the bound
// addresses on stdout once every port accepts connections, and runs until
// SIGINT or SIGTERM.
//
// Without --data-dir everything is in memory and a restart starts empty.
// With --data-dir the topics, their records, committed offsets, producer
// ids and transactions are kept in DIR, and a restart on the same DIR
// carries on where the last run ended: records are written to DIR as they
// are produced, not only at exit, so they survive the process being killed
// (SIGKILL) too. A transaction still open at a kill is aborted on the
// next start, with an abort marker in the log (see abortOpen): kfake does
// not keep it across the kill. Kafka does (its transaction coordinator's
// state is a replicated log) until the transaction times out, so here, not
// with Kafka, an exactly-once sink's transaction staged for a checkpoint
// is lost to a kill -9 of the broker. One open at a clean stop stays open
// for its producer to finish. --sync-writes adds an fsync per write, which
// matters only when the machine itself may crash, not the process.
//
// Topics given with --topics that DIR already holds are kept as they are
// (records and partition count); the others are created.
//
// --sasl (repeatable, one user each; MECHANISM is PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512) makes every client authenticate on every port. The users
// are exactly those given on each start: kfake would otherwise bring back
// the users a previous run saved in DIR (sasl.json) in place of the flags,
// so eddy-kafka removes that file first, and users added at run time with
// AlterUserScramCredentials last until the next restart. --tls-cert and
// --tls-key (PEM) serve TLS on every port; there is no plaintext listener
// besides. eddy-kafka's own clients (creating topics, writing abort
// markers) authenticate as the first --sasl user. Toward clients, SASL
// here acts as Kafka's where kfake alone does not: ApiVersions offers
// SaslHandshake from version 0, without which librdkafka (kcat) does no
// SASL (advertiseSASLHandshakeV0), and a wrong password gets
// SASL_AUTHENTICATION_FAILED rather than a closed connection, which
// clients would retry as a network error (refuseBadCredentials).
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.ports, "ports", "9092", "comma-separated 127.0.0.1 ports, one broker per port (0: one the kernel picks; READY names it)")
	flag.StringVar(&cfg.topics, "topics", "", "topics to create, name:partitions,... (partitions default 1)")
	flag.BoolVar(&cfg.autoCreate, "auto-create-topics", false, "create unknown topics when clients ask for them")
	flag.StringVar(&cfg.dataDir, "data-dir", "", "keep topics, offsets, groups and transactions in this directory across restarts (default: in memory)")
	flag.BoolVar(&cfg.syncWrites, "sync-writes", false, "fsync every write (survives a machine crash; a killed process loses nothing without it)")
	// Checked in run, for one line of error rather than flag's usage text.
	flag.Func("sasl", "require SASL authentication from every client, as `MECHANISM:USER:PASSWORD` with MECHANISM PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; repeat for more users (eddy-kafka's own clients use the first)", func(v string) error {
		cfg.sasl = append(cfg.sasl, v)
		return nil
	})
	flag.StringVar(&cfg.tlsCert, "tls-cert", "", "serve TLS (only) on every port with the PEM certificate (chain) in `FILE`; needs --tls-key")
	flag.StringVar(&cfg.tlsKey, "tls-key", "", "PEM private key `FILE` of --tls-cert")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "eddy-kafka:", err)
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	ports, topics   string
	autoCreate      bool
	dataDir         string
	syncWrites      bool
	sasl            []string // MECHANISM:USER:PASSWORD
	tlsCert, tlsKey string
}

func run(cfg config) error {
	dataDir := cfg.dataDir
	var ports []int
	for _, p := range strings.Split(cfg.ports, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("--ports: bad port %q", p)
		}
		ports = append(ports, n)
	}
	if len(ports) == 0 {
		return fmt.Errorf("--ports: no port given")
	}
	topics, err := parseTopics(cfg.topics)
	if err != nil {
		return err
	}
	opts := []kfake.Opt{kfake.Ports(ports...), kfake.NumBrokers(len(ports))}
	if cfg.autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
		if cfg.syncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	} else if cfg.syncWrites {
		return fmt.Errorf("--sync-writes needs --data-dir")
	}
	// kfake creates the seed topics only when it finds no state in the data
	// directory; createMissing below adds those a restart asks for anew.
	for _, t := range topics {
		opts = append(opts, kfake.SeedTopics(t.partitions, t.name))
	}
	users, err := parseSASL(cfg.sasl)
	if err != nil {
		return err
	}
	security, clientOpts, err := securityOpts(users, cfg.tlsCert, cfg.tlsKey)
	if err != nil {
		return err
	}
	opts = append(opts, security...)
	if len(users) > 0 && dataDir != "" {
		// kfake replaces the users of the flags with those a previous run
		// saved here: the flags are to say who may connect.
		if err := os.Remove(filepath.Join(dataDir, "sasl.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("data dir %s: %w", dataDir, err)
		}
	}
	var (
		running = filepath.Join(dataDir, "eddy-kafka.running")
		crashed []openTxn
	)
	if dataDir != "" {
		if _, err := os.Stat(running); err == nil {
			// The last run did not exit: read what it left open before
			// kfake loads the directory.
			if crashed, err = openTransactions(dataDir); err != nil {
				return fmt.Errorf("data dir %s: %w", dataDir, err)
			}
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		if dataDir != "" {
			return fmt.Errorf("data dir %s: %w", dataDir, err)
		}
		return err
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	// A plain TCP dial is enough with TLS too: the listener accepts the
	// connection before any handshake.
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range addrs {
		for {
			conn, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s does not accept connections: %w", a, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if len(users) > 0 {
		if err := advertiseSASLHandshakeV0(c, addrs, clientOpts); err != nil {
			return err
		}
		if err := refuseBadCredentials(c, addrs, clientOpts, users); err != nil {
			return err
		}
	}
	if err := createMissing(c, addrs, topics, clientOpts); err != nil {
		return err
	}
	if dataDir != "" {
		if err := abortOpen(c, addrs, crashed, clientOpts); err != nil {
			return fmt.Errorf("data dir %s: %w", dataDir, err)
		}
		if err := os.WriteFile(running, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("READY %s\n", strings.Join(addrs, ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Close() // writes the state to the data dir
	if dataDir != "" {
		return os.Remove(running)
	}
	return nil
}

// openTxn is a transaction whose producer wrote records to a partition
// but no commit or abort marker after them.
type openTxn struct {
	topic     string
	partition int32
	producer  int64
	epoch     int16
}

// openTransactions lists the transactions a killed run left open in
// dataDir. kfake's segment files (partitions/TOPIC-N/BASE.dat, TOPIC
// path-escaped) hold record batches in Kafka's wire format.
func openTransactions(dataDir string) ([]openTxn, error) {
	parts, err := os.ReadDir(filepath.Join(dataDir, "partitions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var open []openTxn
	for _, pe := range parts {
		i := strings.LastIndexByte(pe.Name(), '-')
		if i < 0 {
			continue
		}
		topic, err := url.PathUnescape(pe.Name()[:i])
		p, perr := strconv.ParseInt(pe.Name()[i+1:], 10, 32)
		if err != nil || perr != nil {
			continue
		}
		dir := filepath.Join(dataDir, "partitions", pe.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var bases []int64
		for _, f := range files {
			if b, ok := strings.CutSuffix(f.Name(), ".dat"); ok {
				if n, err := strconv.ParseInt(b, 10, 64); err == nil {
					bases = append(bases, n)
				}
			}
		}
		slices.Sort(bases)
		epochs := map[int64]int16{} // producer → epoch of its open transaction
		for _, base := range bases {
			raw, err := os.ReadFile(filepath.Join(dir, strconv.FormatInt(base, 10)+".dat"))
			if err != nil {
				return nil, err
			}
			for len(raw) >= 12 {
				size := 12 + int(binary.BigEndian.Uint32(raw[8:12]))
				if size > len(raw) {
					break // a torn write at the kill: kfake truncates it
				}
				var b kmsg.RecordBatch
				if err := b.ReadFrom(raw[:size]); err != nil {
					break
				}
				raw = raw[size:]
				const transactional, control = 0x10, 0x20
				switch {
				case b.Attributes&control != 0:
					delete(epochs, b.ProducerID)
				case b.Attributes&transactional != 0:
					epochs[b.ProducerID] = b.ProducerEpoch
				}
			}
		}
		for producer, epoch := range epochs {
			open = append(open, openTxn{topic, int32(p), producer, epoch})
		}
	}
	return open, nil
}

// abortOpen writes an abort marker for each transaction a killed run left
// open. kfake aborts them when it loads the directory, but only in memory:
// without a marker in the log, a read_committed client (franz-go,
// librdkafka, Java) that is told the transaction was aborted skips every
// later transactional batch of that producer id while it waits for the
// marker — so a producer that re-initialises the same transactional.id
// after the restart would have its committed transactions hidden.
func abortOpen(c *kfake.Cluster, addrs []string, open []openTxn, clientOpts []kgo.Opt) error {
	if len(open) == 0 {
		return nil
	}
	cl, ctx, done, err := ownClient(addrs, clientOpts)
	if err != nil {
		return err
	}
	defer done()
	for _, o := range open {
		// WriteTxnMarkers goes to the partition's leader.
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = o.producer, o.epoch, false
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = o.topic, []int32{o.partition}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, cl.Broker(int(c.LeaderFor(o.topic, o.partition))))
		if err != nil {
			return fmt.Errorf("abort the transaction of producer %d open at the last kill in %s/%d: %w", o.producer, o.topic, o.partition, err)
		}
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return fmt.Errorf("abort the transaction of producer %d open at the last kill in %s/%d: %w", o.producer, o.topic, o.partition, err)
					}
				}
			}
		}
	}
	return nil
}

type topic struct {
	name       string
	partitions int32
}

func parseTopics(flagValue string) ([]topic, error) {
	var ts []topic
	for _, t := range strings.Split(flagValue, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		name, parts, hasParts := strings.Cut(t, ":")
		n := 1
		if hasParts {
			var err error
			n, err = strconv.Atoi(parts)
			if err != nil || n <= 0 || n > 1<<20 {
				return nil, fmt.Errorf("--topics: bad partition count in %q", t)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("--topics: empty topic name in %q", t)
		}
		ts = append(ts, topic{name, int32(n)})
	}
	return ts, nil
}

// createMissing creates the topics the cluster lacks (after a restart on a
// data dir that predates them), through the broker's own CreateTopics API.
// A topic that exists with another partition count is left alone, with a
// note on stderr: changing it would move keys to other partitions.
func createMissing(c *kfake.Cluster, addrs []string, topics []topic, clientOpts []kgo.Opt) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, t := range topics {
		if c.TopicInfo(t.name) != nil {
			if have := len(c.PartitionInfos(t.name)); have != int(t.partitions) {
				fmt.Fprintf(os.Stderr, "eddy-kafka: topic %s has %d partitions in the data dir (asked %d); keeping %d\n", t.name, have, t.partitions, have)
			}
			continue
		}
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.name
		rt.NumPartitions = t.partitions
		rt.ReplicationFactor = -1
		req.Topics = append(req.Topics, rt)
	}
	if len(req.Topics) == 0 {
		return nil
	}
	cl, ctx, done, err := ownClient(addrs, clientOpts)
	if err != nil {
		return err
	}
	defer done()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", rt.Topic, err)
		}
	}
	return nil
}

// saslUser is one --sasl value.
type saslUser struct {
	mechanism, user, password string
}

// parseSASL parses the --sasl values. Its errors do not repeat them: they
// hold passwords.
func parseSASL(values []string) ([]saslUser, error) {
	var (
		users []saslUser
		seen  = map[[2]string]bool{}
	)
	for i, v := range values {
		mechanism, rest, ok1 := strings.Cut(v, ":")
		user, password, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("--sasl #%d: want MECHANISM:USER:PASSWORD", i+1)
		}
		mechanism = strings.ToUpper(mechanism)
		switch mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return nil, fmt.Errorf("--sasl #%d: mechanism %q is none of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", i+1, mechanism)
		}
		if user == "" {
			return nil, fmt.Errorf("--sasl #%d: empty user", i+1)
		}
		// kfake checks a PLAIN password against its map of users, where
		// an unknown user's password is "": an empty one would let anybody
		// in.
		if password == "" {
			return nil, fmt.Errorf("--sasl #%d: empty password for %s", i+1, user)
		}
		if seen[[2]string{mechanism, user}] {
			return nil, fmt.Errorf("--sasl #%d: %s user %s given twice", i+1, mechanism, user)
		}
		seen[[2]string{mechanism, user}] = true
		users = append(users, saslUser{mechanism, user, password})
	}
	return users, nil
}

// securityOpts turns --sasl and --tls-* into kfake options for the
// listeners and kgo options for eddy-kafka's own clients of them.
func securityOpts(users []saslUser, certFile, keyFile string) ([]kfake.Opt, []kgo.Opt, error) {
	var (
		server []kfake.Opt
		client []kgo.Opt
	)
	for _, u := range users {
		server = append(server, kfake.Superuser(u.mechanism, u.user, u.password))
	}
	if len(users) > 0 {
		server = append(server, kfake.EnableSASL())
		first := users[0]
		var m sasl.Mechanism
		switch first.mechanism {
		case "PLAIN":
			m = plain.Auth{User: first.user, Pass: first.password}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: first.user, Pass: first.password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: first.user, Pass: first.password}.AsSha512Mechanism()
		}
		client = append(client, kgo.SASL(m))
	}
	if (certFile == "") != (keyFile == "") {
		return nil, nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", certFile, keyFile, err)
		}
		server = append(server, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
		// eddy-kafka's own clients dial its own loopback listeners: rather
		// than verify the certificate against a CA and a host name (the
		// certificate need not name 127.0.0.1, and its CA is not ours to
		// know), they accept exactly the certificate eddy-kafka serves.
		leaf := cert.Certificate[0]
		client = append(client, kgo.DialTLSConfig(&tls.Config{
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, leaf) {
					return errors.New("the broker does not serve --tls-cert")
				}
				return nil
			},
		}))
	}
	return server, client, nil
}

// advertiseSASLHandshakeV0 makes the cluster's ApiVersions answers say it
// takes SaslHandshake from version 0 on, as Kafka does, rather than only
// version 1, which is all kfake takes and says. librdkafka (kcat) does
// SASL only with a broker whose range holds version 0 (its feature
// SaslHandshake) and then sends version 1 anyway. kfake has no hook to
// amend its own answer, so this asks it once for its ApiVersions, before
// READY, and from then on answers in its place with that, amended; kfake
// still answers requests it would refuse (a version above its own or bad
// client software names). What the answer holds beyond the versions
// (feature levels) is as at the start.
func advertiseSASLHandshakeV0(c *kfake.Cluster, addrs []string, clientOpts []kgo.Opt) error {
	cl, ctx, done, err := ownClient(addrs, clientOpts)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "eddy-kafka", "0"
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("api versions: %w", err)
	}
	maxVersion := int16(-1)
	for i, k := range resp.ApiKeys {
		switch kmsg.Key(k.ApiKey) {
		case kmsg.SASLHandshake:
			resp.ApiKeys[i].MinVersion = 0
		case kmsg.ApiVersions:
			maxVersion = k.MaxVersion
		}
	}
	c.ControlKey(int16(kmsg.ApiVersions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ApiVersionsRequest)
		if req.Version > maxVersion || req.Version >= 3 && !(softwareName.MatchString(req.ClientSoftwareName) && softwareName.MatchString(req.ClientSoftwareVersion)) {
			return nil, nil, false
		}
		answer := *resp
		answer.Version = req.Version
		answer.ApiKeys = slices.Clone(resp.ApiKeys)
		return &answer, nil, true
	})
	return nil
}

// softwareName is what Kafka takes as an ApiVersions client software name
// or version.
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// refuseBadCredentials answers a SaslAuthenticate with a wrong password as
// Kafka does, with SASL_AUTHENTICATION_FAILED, so that clients stop and
// say so; kfake instead closes the connection, which clients take for a
// network error and retry. It checks what it can ahead of kfake and leaves
// the rest (good credentials, malformed messages, users it does not know)
// to kfake. For SCRAM it needs the salt kfake tells the client, which
// kfake draws at random: it sets the --sasl users' SCRAM credentials anew
// with salts of its own (AlterUserScramCredentials, as eddy-kafka's own
// client) before READY.
func refuseBadCredentials(c *kfake.Cluster, addrs []string, clientOpts []kgo.Opt, users []saslUser) error {
	g := &credentialGate{plain: map[string]string{}, scram: map[string]scramCredential{}, firsts: map[string]scramFirst{}}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range users {
		if u.mechanism == "PLAIN" {
			g.plain[u.user] = u.password
			continue
		}
		h, mechanism := sha256.New, int8(1)
		if u.mechanism == "SCRAM-SHA-512" {
			h, mechanism = sha512.New, 2
		}
		salt := make([]byte, 16)
		rand.Read(salt)
		salted, err := pbkdf2.Key(h, u.password, salt, scramIterations, h().Size())
		if err != nil {
			return err
		}
		g.scram[u.mechanism+" "+u.user] = scramCredential{h, salt, salted}
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.user, mechanism, scramIterations, salt, salted
		req.Upsertions = append(req.Upsertions, up)
	}
	if len(req.Upsertions) > 0 {
		cl, ctx, done, err := ownClient(addrs, clientOpts)
		if err != nil {
			return err
		}
		defer done()
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			for _, r := range resp.Results {
				if err = kerr.ErrorForCode(r.ErrorCode); err != nil {
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("set the SCRAM credentials of --sasl: %w", err)
		}
	}
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		if !g.refuse(req.SASLAuthBytes) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: invalid username or password"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
	// A client changing SCRAM credentials makes the gate's stale: it leaves
	// those users to kfake from then on.
	c.ControlKey(int16(kmsg.AlterUserSCRAMCredentials), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, d := range req.Deletions {
			delete(g.scram, "SCRAM-SHA-256 "+d.Name)
			delete(g.scram, "SCRAM-SHA-512 "+d.Name)
		}
		for _, u := range req.Upsertions {
			delete(g.scram, "SCRAM-SHA-256 "+u.Name)
			delete(g.scram, "SCRAM-SHA-512 "+u.Name)
		}
		return nil, nil, false
	})
	return nil
}

// scramIterations is what kfake tells SCRAM clients, whatever a
// credential says.
const scramIterations = 4096

type scramCredential struct {
	hash         func() hash.Hash
	salt, salted []byte
}

// scramFirst is a client-first-message on its way.
type scramFirst struct {
	user, bare string
}

// credentialGate tells wrong credentials apart in SaslAuthenticate
// requests. It does not know which connection a request comes on (kfake's
// control functions are not told), so it ties a SCRAM client's final
// message to its first by the client's nonce, which starts the nonce of
// the final one, and tells SHA-256 from SHA-512 by the proof's length.
type credentialGate struct {
	mu     sync.Mutex
	plain  map[string]string          // user → password
	scram  map[string]scramCredential // mechanism+" "+user → credential
	firsts map[string]scramFirst      // client nonce → its first message
}

func (g *credentialGate) refuse(msg []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := string(msg)
	switch {
	case strings.Count(s, "\x00") == 2: // PLAIN: authzid NUL user NUL password
		parts := strings.Split(s, "\x00")
		want, ok := g.plain[parts[1]]
		return !ok || parts[2] != want
	case strings.HasPrefix(s, "c="): // SCRAM client-final-message
		withoutProof, proof64, ok := strings.Cut(s, ",p=")
		nonce := ""
		for _, f := range strings.Split(withoutProof, ",") {
			if v, ok := strings.CutPrefix(f, "r="); ok {
				nonce = v
			}
		}
		proof, err := base64.StdEncoding.DecodeString(proof64)
		if !ok || err != nil || nonce == "" {
			return false
		}
		for clientNonce, first := range g.firsts {
			if !strings.HasPrefix(nonce, clientNonce) {
				continue
			}
			delete(g.firsts, clientNonce)
			mechanism := map[int]string{sha256.Size: "SCRAM-SHA-256", sha512.Size: "SCRAM-SHA-512"}[len(proof)]
			cred, known := g.scram[mechanism+" "+first.user]
			if !known {
				return false
			}
			// The server-first-message kfake sent, as it words it: its
			// nonce is the client's followed by kfake's. The client-final
			// one echoes it (RFC 5802); librdkafka's puts the client's
			// nonce before it once more, so the nonce kfake sent is then
			// the final one without that.
			for _, serverNonce := range []string{nonce, strings.TrimPrefix(nonce, clientNonce)} {
				if !strings.HasPrefix(serverNonce, clientNonce) {
					continue
				}
				serverFirst := fmt.Sprintf("r=%s,s=%s,i=%d", serverNonce, base64.StdEncoding.EncodeToString(cred.salt), scramIterations)
				if cred.verify(first.bare+","+serverFirst+","+withoutProof, proof) {
					return false
				}
			}
			return true
		}
		return false
	default: // SCRAM client-first-message: gs2-header "," n=user,r=nonce
		parts := strings.SplitN(s, ",", 3)
		if len(parts) != 3 {
			return false
		}
		var user, nonce string
		for _, f := range strings.Split(parts[2], ",") {
			if v, ok := strings.CutPrefix(f, "n="); ok {
				user = strings.NewReplacer("=3D", "=", "=2C", ",").Replace(v)
			} else if v, ok := strings.CutPrefix(f, "r="); ok {
				nonce = v
			}
		}
		_, known256 := g.scram["SCRAM-SHA-256 "+user]
		_, known512 := g.scram["SCRAM-SHA-512 "+user]
		if nonce == "" || !known256 && !known512 {
			return false
		}
		if len(g.firsts) >= 1024 { // abandoned exchanges
			clear(g.firsts)
		}
		g.firsts[nonce] = scramFirst{user, parts[2]}
		return false
	}
}

// verify tells whether proof is the client's proof of the password for
// authMessage (RFC 5802).
func (c scramCredential) verify(authMessage string, proof []byte) bool {
	mac := hmac.New(c.hash, c.salted)
	mac.Write([]byte("Client Key"))
	h := c.hash()
	h.Write(mac.Sum(nil))
	storedKey := h.Sum(nil)
	mac = hmac.New(c.hash, storedKey)
	mac.Write([]byte(authMessage))
	clientKey := mac.Sum(nil) // the client signature, until XORed with the proof
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	h = c.hash()
	h.Write(clientKey)
	return hmac.Equal(h.Sum(nil), storedKey)
}

// ownClient returns a client of eddy-kafka's own (clientOpts: as its first
// --sasl user, trusting its own certificate) and a 10 s context for its
// requests; done releases both.
func ownClient(addrs []string, clientOpts []kgo.Opt) (cl *kgo.Client, ctx context.Context, done func(), err error) {
	cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, clientOpts...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}
