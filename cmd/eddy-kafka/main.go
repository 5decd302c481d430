// Command eddy-kafka is a Kafka-protocol broker for tests and local use,
// built on franz-go's pkg/kfake. It is not a Kafka cluster: one process,
// no replication, no SASL or TLS.
//
//	eddy-kafka --ports 9092,9093,9094 --topics payments:4,alerts:1 [--data-dir DIR]
//
// It listens on the given 127.0.0.1 ports (one broker node per port),
// prints "READY addr,addr,..." on stdout once every port accepts
// connections, and runs until SIGINT or SIGTERM.
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
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	ports := flag.String("ports", "9092", "comma-separated 127.0.0.1 ports, one broker per port")
	topics := flag.String("topics", "", "topics to create, name:partitions,... (partitions default 1)")
	autoCreate := flag.Bool("auto-create-topics", false, "create unknown topics when clients ask for them")
	dataDir := flag.String("data-dir", "", "keep topics, offsets, groups and transactions in this directory across restarts (default: in memory)")
	syncWrites := flag.Bool("sync-writes", false, "fsync every write (survives a machine crash; a killed process loses nothing without it)")
	flag.Parse()
	if err := run(*ports, *topics, *autoCreate, *dataDir, *syncWrites); err != nil {
		fmt.Fprintln(os.Stderr, "eddy-kafka:", err)
		os.Exit(1)
	}
}

func run(portsFlag, topicsFlag string, autoCreate bool, dataDir string, syncWrites bool) error {
	var ports []int
	for _, p := range strings.Split(portsFlag, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("--ports: bad port %q", p)
		}
		ports = append(ports, n)
	}
	if len(ports) == 0 {
		return fmt.Errorf("--ports: no port given")
	}
	topics, err := parseTopics(topicsFlag)
	if err != nil {
		return err
	}
	opts := []kfake.Opt{kfake.Ports(ports...), kfake.NumBrokers(len(ports))}
	if autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
		if syncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	} else if syncWrites {
		return fmt.Errorf("--sync-writes needs --data-dir")
	}
	// kfake creates the seed topics only when it finds no state in the data
	// directory; createMissing below adds those a restart asks for anew.
	for _, t := range topics {
		opts = append(opts, kfake.SeedTopics(t.partitions, t.name))
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
	if err := createMissing(c, addrs, topics); err != nil {
		return err
	}
	if dataDir != "" {
		if err := abortOpen(c, addrs, crashed); err != nil {
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
func abortOpen(c *kfake.Cluster, addrs []string, open []openTxn) error {
	if len(open) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
func createMissing(c *kfake.Cluster, addrs []string, topics []topic) error {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
