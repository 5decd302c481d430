package dataflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// outlet is a producer task's end of one channel to one consumer task.
// Only the producing task's goroutine uses it: it delivers its own
// messages, blocking while the consumer has no room, and that wait is the
// producer's backpressure (recorded in m). There is no sender goroutine
// shared between channels or tasks, so a blocked channel never holds up
// another.
type outlet interface {
	// deliver sends msg; it blocks while the consumer has no room (a full
	// queue, no credit), until ctx is done or the channel breaks.
	deliver(ctx context.Context, msg message, m *taskMetrics) error
	// finish confirms, after the end of stream was delivered, that the
	// consumer has every message.
	finish(ctx context.Context) error
	// abort releases the channel after a failure; idempotent.
	abort()
}

// localOutlet is a channel to a task in this process: its input queue.
type localOutlet struct{ gate *inputGate }

func (o localOutlet) deliver(ctx context.Context, msg message, m *taskMetrics) error {
	select {
	case o.gate.queue <- msg:
		return nil
	default:
	}
	m.blockStart()
	defer m.blockEnd()
	select {
	case o.gate.queue <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (localOutlet) finish(context.Context) error { return nil }
func (localOutlet) abort()                       {}

// openBackoff bounds the wait between attempts to open a channel whose
// consumer is not deployed yet.
const (
	openBackoffMin = 10 * time.Millisecond
	openBackoffMax = 500 * time.Millisecond
)

// remoteOutlet is a channel to a task on another worker: one Exchange
// Transfer call. The producing task sends frames itself; a goroutine per
// call only reads the consumer's credit grants (and the call's end).
type remoteOutlet struct {
	addr     string // the consumer's worker
	consumer string
	channel  int
	open     *eddyv1.ChannelOpen

	stream grpc.BidiStreamingClient[eddyv1.TransferRequest, eddyv1.TransferResponse]
	cancel context.CancelFunc
	sent   int64        // frames sent; owned by the producing goroutine
	credit atomic.Int64 // credits granted so far
	signal chan struct{}
	done   chan struct{} // closed when the call ended; then err is set
	err    error         // the call's status; nil for OK
	eos    bool          // end of stream sent
}

// connect opens the call: the ChannelOpen, then the first grant. While the
// consumer's worker answers UNAVAILABLE (not deployed yet, or not
// listening yet) it retries with backoff, for as long as ctx allows.
func (o *remoteOutlet) connect(ctx context.Context, conn *grpc.ClientConn) error {
	client := eddyv1.NewExchangeClient(conn)
	backoff := openBackoffMin
	for {
		err := o.try(ctx, client)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if status.Code(err) != codes.Unavailable {
			return o.lostf("open refused", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(2*backoff, openBackoffMax)
	}
}

func (o *remoteOutlet) try(ctx context.Context, client eddyv1.ExchangeClient) error {
	callCtx, cancel := context.WithCancel(ctx)
	stream, err := client.Transfer(callCtx)
	if err != nil {
		cancel()
		return err
	}
	// A Send that fails ends the call; Recv returns why.
	if err := stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Open{Open: o.open}}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return err
	}
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Internal, "the consumer ended the call without granting credit")
	}
	if err != nil {
		cancel()
		return err
	}
	o.stream, o.cancel = stream, cancel
	o.credit.Store(int64(first.GetCredits()))
	o.signal = make(chan struct{}, 1)
	o.done = make(chan struct{})
	go o.readCredits()
	return nil
}

// readCredits adds the consumer's grants to the balance until the call
// ends, then records its status.
func (o *remoteOutlet) readCredits() {
	defer close(o.done)
	for {
		resp, err := o.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				o.err = err
			}
			return
		}
		o.credit.Add(int64(resp.GetCredits()))
		select {
		case o.signal <- struct{}{}:
		default:
		}
	}
}

func (o *remoteOutlet) deliver(ctx context.Context, msg message, m *taskMetrics) error {
	if msg.kind == msgBatch && msg.batch.Len() == 0 {
		return nil // frames are never empty
	}
	if msg.kind == msgProcessingTime {
		return nil // a local harness's (ManualProcessingTime): one process only
	}
	if o.sent >= o.credit.Load() {
		m.blockStart()
		for o.sent >= o.credit.Load() {
			select {
			case <-o.signal:
			case <-o.done:
				m.blockEnd()
				return o.ended()
			case <-ctx.Done():
				m.blockEnd()
				return ctx.Err()
			}
		}
		m.blockEnd()
	}
	o.sent++
	if msg.kind == msgEOS {
		o.eos = true
	}
	err := o.stream.Send(&eddyv1.TransferRequest{Kind: &eddyv1.TransferRequest_Frame{Frame: messageFrame(msg)}})
	if msg.kind == msgBatch {
		msg.batch.Recycle() // this outlet owned it (send), and the frame is a copy
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, io.EOF) {
			return o.lostf("send", err)
		}
		// The call ended; its status follows promptly.
		select {
		case <-o.done:
			return o.ended()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ended explains a call that ended while the producer still had frames.
func (o *remoteOutlet) ended() error {
	if o.err == nil {
		return o.lostf("", errors.New("the consumer ended the channel early"))
	}
	return o.lostf("", o.err)
}

func (o *remoteOutlet) lostf(what string, err error) error {
	if what != "" {
		what += ": "
	}
	return mark(fmt.Errorf("output to worker %s lost: channel %d to task %s: %s%s", o.addr, o.channel, o.consumer, what, describeRPCError(err)), ErrChannelLost)
}

func (o *remoteOutlet) finish(ctx context.Context) error {
	if o.stream == nil {
		return nil
	}
	_ = o.stream.CloseSend()
	select {
	case <-o.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if o.err != nil {
		return o.lostf("end of stream not confirmed", o.err)
	}
	o.cancel()
	return nil
}

func (o *remoteOutlet) abort() {
	if o.cancel != nil {
		o.cancel()
		<-o.done // Recv returns at once once the call is cancelled
	}
}
