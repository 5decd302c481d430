// Package rpc holds what every Eddy gRPC server and client shares beyond
// the generated code of package eddyv1: the standard health and reflection
// services, server and dial options that agree with each other (message
// size, keepalive), transport security (TLS, Credentials: mutual TLS
// between cluster members, and the refusal of plaintext beyond
// loopback), the NotLeader redirect carried in a gRPC status, and
// the wire defaults of request fields.
//
// It is not the place for the servers themselves (the scheduler serves
// Control and Cluster, workers serve Exchange) nor for clients with retry
// policies; those belong to the packages that use them.
package rpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// DefaultTenant is the tenant a request means when its tenant field is
// empty.
const DefaultTenant = "default"

// Tenant returns the tenant a request field names: t, or DefaultTenant
// when t is empty.
func Tenant(t string) string {
	if t == "" {
		return DefaultTenant
	}
	return t
}

// MaxMessageSize bounds every message in both directions. It must hold a
// whole module in UploadModule and GetModule (Go-built modules are several
// MB) and the largest batch a task sends as one Exchange frame. gRPC's
// default of 4 MiB is too small for the former.
const MaxMessageSize = 64 << 20

// Keepalive: clients ping idle connections so that a dead peer (a worker
// killed with its TCP connections left half-open, a partition) shows up as
// a failed call within keepaliveTime+keepaliveTimeout instead of never. A
// server closes connections that ping more often than minPingInterval, so
// the client's interval must stay above it: both sides take them from here.
const (
	keepaliveTime    = 20 * time.Second
	keepaliveTimeout = 10 * time.Second
	minPingInterval  = 10 * time.Second
)

// ServerOptions are the options every Eddy gRPC server is created with;
// append more as needed.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             minPingInterval,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    keepaliveTime,
			Timeout: keepaliveTimeout,
		}),
	}
}

// DialOptions are the options every Eddy gRPC client connection is
// created with (grpc.NewClient). Connections are plaintext; see
// Credentials.DialOptions for TLS.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
		),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                keepaliveTime,
			Timeout:             keepaliveTimeout,
			PermitWithoutStream: true,
		}),
	}
}

// RegisterStandard registers the gRPC health service (grpc.health.v1) and
// server reflection (v1 and v1alpha, for grpcurl and friends) on s, and
// reports SERVING for the whole server ("") and for every service already
// registered on s. Call it after registering the Eddy services and before
// s.Serve.
//
// The returned health server lets the caller change a status later: a
// coordinator may report eddy.v1.Cluster NOT_SERVING while it follows,
// and every server calls Shutdown on it before stopping, so load
// balancers and probes stop sending calls first.
func RegisterStandard(s *grpc.Server) *health.Server {
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	for name := range s.GetServiceInfo() {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	return hs
}

// NotLeaderError is the error a coordinator returns for a call only the
// leader may serve: status UNAVAILABLE with an eddyv1.NotLeader detail
// naming the leader. leaderAddress is the leader's gRPC address, or empty
// when no leader is known.
func NotLeaderError(leaderID, leaderAddress string) error {
	msg := "no coordinator leader is known; retry later"
	if leaderAddress != "" {
		msg = fmt.Sprintf("not the coordinator leader; the leader is %s at %s", leaderID, leaderAddress)
	}
	st := status.New(codes.Unavailable, msg)
	detailed, err := st.WithDetails(&eddyv1.NotLeader{LeaderId: leaderID, LeaderAddress: leaderAddress})
	if err != nil {
		// Marshaling a two-string message cannot fail; keep the code anyway.
		return st.Err()
	}
	return detailed.Err()
}

// LeaderFromError reports whether err is (or wraps) a NotLeaderError, and
// if so returns its detail. A detail with an empty LeaderAddress means no
// leader is known: retry any coordinator after a backoff.
func LeaderFromError(err error) (*eddyv1.NotLeader, bool) {
	st, ok := status.FromError(err) // unwraps, keeping the details
	if !ok || st.Code() != codes.Unavailable {
		return nil, false
	}
	for _, d := range st.Details() {
		if nl, ok := d.(*eddyv1.NotLeader); ok {
			return nl, true
		}
	}
	return nil, false
}

// AuthorizationKey is the gRPC metadata key of a call's credentials:
// "Bearer <token>".
const AuthorizationKey = "authorization"

// WithToken is the dial option that sends token with every call. It does
// not require transport security, since plaintext stays allowed on
// loopback; a server on any other address refuses to run without TLS.
func WithToken(token string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearer(token))
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{AuthorizationKey: "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
