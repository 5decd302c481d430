package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/eddy-stream/eddy/abi"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/proto/rpc"
)

// serve starts a real gRPC server on 127.0.0.1 with the standard options
// and services, registers more with register, and returns a connection.
func serve(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(rpc.ServerOptions()...)
	register(s)
	rpc.RegisterStandard(s)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), rpc.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return conn
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exchangeServer is a minimal receiver following the Exchange contract: a
// window of `window` frames per channel, one credit back per frame the
// consumer takes, RESOURCE_EXHAUSTED for a frame beyond the grants. The
// consumer takes nothing until gate is closed, so a test can see the
// sender stall on credits.
type exchangeServer struct {
	eddyv1.UnimplementedExchangeServer
	window int
	gate   chan struct{}

	received       atomic.Int64 // frames received
	maxOutstanding atomic.Int64 // most frames buffered at once
	result         chan received
}

type received struct {
	open       *eddyv1.ChannelOpen
	records    []abi.Record
	watermarks []int64
	barriers   []uint64
	idles      int
	ended      bool
}

func (s *exchangeServer) Transfer(stream grpc.BidiStreamingServer[eddyv1.TransferRequest, eddyv1.TransferResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil || open.GetJobId() == "" {
		return status.Error(codes.InvalidArgument, "exchange: the first message must be a ChannelOpen")
	}
	var balance atomic.Int64 // credits granted and not yet used
	buffer := make(chan *eddyv1.Frame, s.window)
	balance.Store(int64(s.window))
	if err := stream.Send(&eddyv1.TransferResponse{Credits: uint32(s.window)}); err != nil {
		return err
	}

	// The consumer: takes frames out of the buffer and gives their credit
	// back. It adds to the balance before granting, so the receive loop
	// never sees a frame the sender was not allowed to send as allowed.
	consumed := make(chan error, 1)
	stop := make(chan struct{}) // closed when the call fails
	go func() {
		got := received{open: open}
		defer func() { s.result <- got }()
		select {
		case <-s.gate:
		case <-stop:
			consumed <- nil
			return
		}
		for f := range buffer {
			switch k := f.GetKind().(type) {
			case *eddyv1.Frame_Batch:
				recs, err := abi.DecodeBatch(k.Batch, nil)
				if err != nil {
					consumed <- status.Error(codes.InvalidArgument, err.Error())
					return
				}
				got.records = append(got.records, recs...)
			case *eddyv1.Frame_Watermark:
				got.watermarks = append(got.watermarks, k.Watermark)
			case *eddyv1.Frame_Idle:
				got.idles++
			case *eddyv1.Frame_Barrier:
				got.barriers = append(got.barriers, k.Barrier.GetCheckpointId())
			case *eddyv1.Frame_EndOfInput:
				got.ended = true
				consumed <- nil
				return
			}
			balance.Add(1)
			if err := stream.Send(&eddyv1.TransferResponse{Credits: 1}); err != nil {
				consumed <- err
				return
			}
		}
		consumed <- status.Error(codes.Aborted, "exchange: the channel ended without end_of_input")
	}()

	fail := func(err error) error {
		close(stop)
		close(buffer)
		<-consumed // no Send after the handler returns
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return fail(err)
		}
		f := req.GetFrame()
		if f == nil || f.GetKind() == nil {
			return fail(status.Error(codes.InvalidArgument, "exchange: expected a frame"))
		}
		s.received.Add(1)
		if balance.Add(-1) < 0 {
			return fail(status.Error(codes.ResourceExhausted, "exchange: frame sent without credit"))
		}
		buffer <- f // cannot block: len(buffer) <= frames granted and unused
		for n := int64(len(buffer)); ; {
			m := s.maxOutstanding.Load()
			if n <= m || s.maxOutstanding.CompareAndSwap(m, n) {
				break
			}
		}
		if _, end := f.GetKind().(*eddyv1.Frame_EndOfInput); end {
			close(buffer)
			return <-consumed
		}
	}
}

// creditSender sends frames on a Transfer stream, never more than the
// receiver granted: the sender's half of the Exchange contract.
type creditSender struct {
	stream  grpc.BidiStreamingClient[eddyv1.TransferRequest, eddyv1.TransferResponse]
	credits chan uint32
	done    chan error // the call's final status: nil for OK
	balance int64
	waits   int // times the sender found no credit
}

func newCreditSender(stream grpc.BidiStreamingClient[eddyv1.TransferRequest, eddyv1.TransferResponse]) *creditSender {
	s := &creditSender{stream: stream, credits: make(chan uint32, 64), done: make(chan error, 1)}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				s.done <- err
				return
			}
			s.credits <- resp.GetCredits()
		}
	}()
	return s
}

func (s *creditSender) send(f *eddyv1.Frame) error {
	for s.balance == 0 {
		s.waits++
		select {
		case c := <-s.credits:
			s.balance += int64(c)
		case err := <-s.done:
			return fmt.Errorf("waiting for credit: call ended: %v", err)
		}
	}
	s.balance--
	return s.stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Frame{Frame: f}})
}

func openChannel() *eddyv1.TransferRequest {
	return &eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Open{Open: &eddyv1.ChannelOpen{
		JobId: "j1", Attempt: 1, ProducerTaskId: "t0", ConsumerTaskId: "t1", Edge: "enrich", ChannelIndex: 0,
	}}}
}

func batchOf(first, n int) []abi.Record {
	recs := make([]abi.Record, n)
	for i := range recs {
		k := first + i
		recs[i] = abi.Record{Key: fmt.Appendf(nil, "k%d", k%7), Value: fmt.Appendf(nil, `{"n":%d}`, k), Timestamp: int64(1000 * k)}
		if k%5 == 0 {
			recs[i].Headers = []abi.Header{{Key: "h", Value: []byte("v")}}
		}
	}
	return recs
}

func TestExchangeCreditFlow(t *testing.T) {
	const window, batches, perBatch = 4, 40, 5
	srv := &exchangeServer{window: window, gate: make(chan struct{}), result: make(chan received, 1)}
	conn := serve(t, func(s *grpc.Server) { eddyv1.RegisterExchangeServer(s, srv) })
	ctx := testContext(t)

	stream, err := eddyv1.NewExchangeClient(conn).Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(openChannel()); err != nil {
		t.Fatal(err)
	}
	sender := newCreditSender(stream)

	var want []abi.Record
	var wantWatermarks []int64
	sent := make(chan error, 1)
	go func() {
		sent <- func() error {
			for b := range batches {
				recs := batchOf(b*perBatch, perBatch)
				want = append(want, recs...)
				if err := sender.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Batch{Batch: abi.AppendBatch(nil, recs)}}); err != nil {
					return err
				}
				wm := int64(1000 * (b*perBatch + perBatch - 1))
				wantWatermarks = append(wantWatermarks, wm)
				if err := sender.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: wm}}); err != nil {
					return err
				}
				if b == batches/2 {
					barrier := &eddyv1.Barrier{CheckpointId: 7, TriggeredUnixMs: 1, Kind: eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT}
					if err := sender.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Barrier{Barrier: barrier}}); err != nil {
						return err
					}
					if err := sender.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Idle{Idle: &eddyv1.Idle{}}}); err != nil {
						return err
					}
				}
			}
			wantWatermarks = append(wantWatermarks, math.MaxInt64)
			if err := sender.send(&eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: math.MaxInt64}}); err != nil {
				return err
			}
			if err := sender.send(&eddyv1.Frame{Kind: &eddyv1.Frame_EndOfInput{EndOfInput: &eddyv1.EndOfInput{}}}); err != nil {
				return err
			}
			return stream.CloseSend()
		}()
	}()

	// With the consumer held, the sender must stall after exactly one
	// window of frames.
	deadline := time.Now().Add(10 * time.Second)
	for srv.received.Load() < window {
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d frames, want the window of %d", srv.received.Load(), window)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-sent:
		t.Fatalf("sender finished with the consumer held (err %v)", err)
	default:
	}
	close(srv.gate)

	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	if err := <-sender.done; err != nil {
		t.Fatalf("call ended with %v, want OK", err)
	}
	got := <-srv.result

	if !proto.Equal(got.open, openChannel().GetOpen()) {
		t.Errorf("open = %v", got.open)
	}
	if !got.ended {
		t.Error("end_of_input not received")
	}
	if len(got.records) != len(want) {
		t.Fatalf("received %d records, want %d", len(got.records), len(want))
	}
	for i := range want {
		g, w := got.records[i], want[i]
		if !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || g.Timestamp != w.Timestamp || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d = %+v, want %+v", i, g, w)
		}
	}
	if !slices.Equal(got.watermarks, wantWatermarks) {
		t.Errorf("watermarks = %v, want %v", got.watermarks, wantWatermarks)
	}
	if !slices.Equal(got.barriers, []uint64{7}) || got.idles != 1 {
		t.Errorf("barriers = %v, idles = %d", got.barriers, got.idles)
	}
	if m := srv.maxOutstanding.Load(); m != window {
		t.Errorf("receiver buffered at most %d frames, want exactly the window %d", m, window)
	}
	if sender.waits == 0 {
		t.Error("the sender never waited for credit")
	}
}

// A sender that ignores its credits is cut off: the receiver's side of the
// contract, and proof that the test server would have caught a violation.
func TestExchangeOverrunRefused(t *testing.T) {
	const window = 2
	srv := &exchangeServer{window: window, gate: make(chan struct{}), result: make(chan received, 1)}
	conn := serve(t, func(s *grpc.Server) { eddyv1.RegisterExchangeServer(s, srv) })
	ctx := testContext(t)

	stream, err := eddyv1.NewExchangeClient(conn).Transfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(openChannel()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= window; i++ {
		f := &eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: int64(i)}}
		if err := stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Frame{Frame: f}}); err != nil {
			break // the server already ended the call; Recv has the status
		}
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue // credit grants
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call ended with %v, want RESOURCE_EXHAUSTED", err)
		}
		return
	}
}

func TestHealth(t *testing.T) {
	conn := serve(t, func(s *grpc.Server) {
		eddyv1.RegisterExchangeServer(s, &exchangeServer{})
	})
	ctx := testContext(t)
	client := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", "eddy.v1.Exchange"} {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("check %q: %v", service, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("check %q = %v, want SERVING", service, resp.GetStatus())
		}
	}
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "eddy.v1.Control"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("check of an unregistered service: %v, want NOT_FOUND", err)
	}
}

func TestReflection(t *testing.T) {
	conn := serve(t, func(s *grpc.Server) {
		eddyv1.RegisterExchangeServer(s, &exchangeServer{})
		eddyv1.RegisterControlServer(s, eddyv1.UnimplementedControlServer{})
		eddyv1.RegisterClusterServer(s, eddyv1.UnimplementedClusterServer{})
	})
	ctx := testContext(t)
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("reflection error: %v", e)
		}
		return resp
	}

	var services []string
	for _, s := range ask(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}).GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"eddy.v1.Control", "eddy.v1.Cluster", "eddy.v1.Exchange", "grpc.health.v1.Health"} {
		if !slices.Contains(services, want) {
			t.Errorf("services %v lack %s", services, want)
		}
	}

	resp := ask(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "eddy.v1.Control"},
	})
	var files []string
	for _, raw := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
		var fd descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &fd); err != nil {
			t.Fatal(err)
		}
		files = append(files, fd.GetName())
	}
	// The file and its dependency, so a client can decode every message.
	for _, want := range []string{"eddy/v1/control.proto", "eddy/v1/common.proto"} {
		if !slices.Contains(files, want) {
			t.Errorf("descriptors %v lack %s", files, want)
		}
	}
}

// notLeaderControl answers every ClusterInfo with a redirect.
type notLeaderControl struct {
	eddyv1.UnimplementedControlServer
}

func (notLeaderControl) ClusterInfo(context.Context, *eddyv1.ClusterInfoRequest) (*eddyv1.ClusterInfoResponse, error) {
	return nil, rpc.NotLeaderError("c2", "127.0.0.1:7002")
}

func TestNotLeaderOverTheWire(t *testing.T) {
	conn := serve(t, func(s *grpc.Server) { eddyv1.RegisterControlServer(s, notLeaderControl{}) })
	_, err := eddyv1.NewControlClient(conn).ClusterInfo(testContext(t), &eddyv1.ClusterInfoRequest{})
	leader, ok := rpc.LeaderFromError(fmt.Errorf("cluster info: %w", err))
	if !ok {
		t.Fatalf("LeaderFromError(%v) found no leader", err)
	}
	if leader.GetLeaderId() != "c2" || leader.GetLeaderAddress() != "127.0.0.1:7002" {
		t.Errorf("leader = %v", leader)
	}
}

func TestLeaderFromError(t *testing.T) {
	noDetail := status.Error(codes.Unavailable, "connection refused")
	wrongCode, _ := status.New(codes.Internal, "x").WithDetails(&eddyv1.NotLeader{LeaderAddress: "a:1"})
	for _, tc := range []struct {
		name     string
		err      error
		wantOK   bool
		wantAddr string
	}{
		{name: "nil", err: nil},
		{name: "plain error", err: errors.New("boom")},
		{name: "unavailable without detail", err: noDetail},
		{name: "detail with another code", err: wrongCode.Err()},
		{name: "leader known", err: rpc.NotLeaderError("c1", "10.0.0.1:7000"), wantOK: true, wantAddr: "10.0.0.1:7000"},
		{name: "no leader known", err: rpc.NotLeaderError("", ""), wantOK: true},
		{name: "wrapped", err: fmt.Errorf("submit: %w", rpc.NotLeaderError("c1", "h:1")), wantOK: true, wantAddr: "h:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, ok := rpc.LeaderFromError(tc.err)
			if ok != tc.wantOK || leader.GetLeaderAddress() != tc.wantAddr {
				t.Errorf("LeaderFromError = %v, %v; want ok %v, address %q", leader, ok, tc.wantOK, tc.wantAddr)
			}
			if ok && status.Code(tc.err) != codes.Unavailable {
				t.Errorf("code = %v, want UNAVAILABLE", status.Code(tc.err))
			}
		})
	}
}

func TestTenant(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", rpc.DefaultTenant},
		{"acme", "acme"},
	} {
		if got := rpc.Tenant(tc.in); got != tc.want {
			t.Errorf("Tenant(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
