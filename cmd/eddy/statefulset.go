package main

// Coordinators as a Kubernetes StatefulSet: --statefulset-service derives
// a member's identity and how it enters the group from the host name the
// StatefulSet gives its pod (SET-N), so that one pod template, with no
// shell in the image, serves every ordinal (deploy/kubernetes/).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// statefulIdentity is what --statefulset-service derives for one pod.
type statefulIdentity struct {
	ID        string // "c" + ordinal
	Bootstrap bool   // ordinal 0 forms the group
	Join      string // the others join through ordinal 0
	Advertise string // the pod's stable name in the headless Service
}

// deriveStatefulIdentity reads the pod's host name SET-N: member cN,
// advertised as SET-N.SERVICE:PORT; N = 0 bootstraps (a no-op once its
// volume holds Raft state), the others join SET-0.SERVICE:PORT (again at
// each restart, which is harmless and re-addresses a member).
func deriveStatefulIdentity(hostname, service string, apiPort int) (statefulIdentity, error) {
	i := strings.LastIndexByte(hostname, '-')
	if i <= 0 || i == len(hostname)-1 {
		return statefulIdentity{}, fmt.Errorf("--statefulset-service: host name %q is not a StatefulSet pod's NAME-ORDINAL", hostname)
	}
	set, ordText := hostname[:i], hostname[i+1:]
	ord, err := strconv.Atoi(ordText)
	if err != nil || ord < 0 || strconv.Itoa(ord) != ordText {
		return statefulIdentity{}, fmt.Errorf("--statefulset-service: host name %q does not end in a pod ordinal", hostname)
	}
	if service == "" || strings.ContainsAny(service, ":/ ") {
		return statefulIdentity{}, fmt.Errorf("--statefulset-service %q: want the DNS name of the headless Service", service)
	}
	if apiPort <= 0 {
		return statefulIdentity{}, errors.New("--statefulset-service needs a fixed --api port")
	}
	port := strconv.Itoa(apiPort)
	id := statefulIdentity{
		ID:        "c" + ordText,
		Advertise: net.JoinHostPort(hostname+"."+service, port),
	}
	if ord == 0 {
		id.Bootstrap = true
	} else {
		id.Join = net.JoinHostPort(set+"-0."+service, port)
	}
	return id, nil
}

// applyStatefulSet fills the coordinator flags from --statefulset-service,
// refusing the flags it sets when they are given as well: two sources of
// one identity would be a misconfiguration waiting to split the group.
func (c *coordinatorFlags) applyStatefulSet(fs *flag.FlagSet) error {
	if c.statefulService == "" {
		return nil
	}
	var clash []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "id", "bootstrap", "join", "advertise":
			clash = append(clash, "--"+f.Name)
		}
	})
	if len(clash) > 0 {
		return usageError{fmt.Errorf("--statefulset-service sets %s itself", strings.Join(clash, ", "))}
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("--statefulset-service: %w", err)
	}
	_, portText, err := net.SplitHostPort(c.cfg.APIAddr)
	if err != nil {
		return usageError{fmt.Errorf("--api %q: %w", c.cfg.APIAddr, err)}
	}
	port, _ := strconv.Atoi(portText)
	id, err := deriveStatefulIdentity(host, c.statefulService, port)
	if err != nil {
		return usageError{err}
	}
	c.cfg.NodeID, c.cfg.Raft.Bootstrap, c.cfg.Join, c.cfg.APIAdvertiseAddr = id.ID, id.Bootstrap, id.Join, id.Advertise
	return nil
}

// raftAdvertiseWait bounds the wait for --raft-advertise's name to
// resolve: on Kubernetes a Service's DNS record may trail the pod.
const raftAdvertiseWait = time.Minute

// resolveRaftAdvertise turns --raft-advertise HOST:PORT into IP:PORT, as
// Raft's transport needs an address it can put on the wire. A name is
// resolved once, at start: on Kubernetes it names a Service of the pod,
// whose cluster IP stays when the pod (and its own IP) changes, so the
// members' Raft configuration stays right across restarts.
func resolveRaftAdvertise(ctx context.Context, addr string, lookup func(ctx context.Context, host string) ([]net.IP, error)) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return "", fmt.Errorf("--raft-advertise %q: want HOST:PORT with a fixed port", addr)
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	ctx, cancel := context.WithTimeout(ctx, raftAdvertiseWait)
	defer cancel()
	backoff := 200 * time.Millisecond
	for {
		ips, err := lookup(ctx, host)
		if err == nil {
			if ip := firstIP(ips); ip != nil {
				return net.JoinHostPort(ip.String(), port), nil
			}
			err = errors.New("no address")
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("--raft-advertise %s: resolve %s: %w", addr, host, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// firstIP prefers an IPv4 address, as cluster IPs mostly are.
func firstIP(ips []net.IP) net.IP {
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip
		}
	}
	if len(ips) > 0 {
		return ips[0]
	}
	return nil
}

func lookupIP(ctx context.Context, host string) ([]net.IP, error) {
	return net.DefaultResolver.LookupIP(ctx, "ip", host)
}
