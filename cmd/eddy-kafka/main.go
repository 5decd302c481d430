// Command eddy-kafka is a Kafka-protocol broker for tests and local use,
// built on franz-go's pkg/kfake (in-memory; nothing survives a restart).
//
//	eddy-kafka --ports 9092,9093,9094 --topics payments:4,alerts:1
//
// It listens on the given 127.0.0.1 ports (one broker node per port),
// prints "READY addr,addr,..." on stdout once every port accepts
// connections, and runs until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	ports := flag.String("ports", "9092", "comma-separated 127.0.0.1 ports, one broker per port")
	topics := flag.String("topics", "", "topics to create, name:partitions,... (partitions default 1)")
	autoCreate := flag.Bool("auto-create-topics", false, "create unknown topics when clients ask for them")
	flag.Parse()
	if err := run(*ports, *topics, *autoCreate); err != nil {
		fmt.Fprintln(os.Stderr, "eddy-kafka:", err)
		os.Exit(1)
	}
}

func run(portsFlag, topicsFlag string, autoCreate bool) error {
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
	opts := []kfake.Opt{kfake.Ports(ports...), kfake.NumBrokers(len(ports))}
	if autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if topicsFlag != "" {
		for _, t := range strings.Split(topicsFlag, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				continue
			}
			name, parts, hasParts := strings.Cut(t, ":")
			n := 1
			if hasParts {
				var err error
				n, err = strconv.Atoi(parts)
				if err != nil || n <= 0 {
					return fmt.Errorf("--topics: bad partition count in %q", t)
				}
			}
			if name == "" {
				return fmt.Errorf("--topics: empty topic name in %q", t)
			}
			opts = append(opts, kfake.SeedTopics(int32(n), name))
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
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
	fmt.Printf("READY %s\n", strings.Join(addrs, ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
