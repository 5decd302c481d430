package dataflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/stream"
	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

// ErrChannelLost marks the error of a task whose channel to or from a task
// on another worker broke before its end: the peer worker died, its task
// stopped, or the network failed. The error names the peer's address.
var ErrChannelLost = errors.New("dataflow: channel lost")

// ErrBadFrame marks the error of a task that received a malformed frame
// from another worker.
var ErrBadFrame = errors.New("dataflow: malformed frame")

// markedError reads as err and matches mark as well as everything err
// matches, so that messages stay one clear line without the sentinel's
// text.
type markedError struct{ err, mark error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.mark} }

func mark(err, mark error) error { return &markedError{err: err, mark: mark} }

// Exchange serves the Exchange gRPC service of a worker: it receives the
// channels whose consumer tasks run in this process and puts their frames
// into those tasks' input gates. One Exchange serves every job and attempt
// of the process; RunDeployment registers its consumer tasks with it.
//
// Flow control: the first response of a Transfer call grants a window of
// Options.QueueCapacity credits; every further credit is granted once a
// frame has been put into the consumer's input queue. A consumer that
// stops reading therefore stops the sender after one window, and the
// frames of a channel held here are at most a window plus the queue.
type Exchange struct {
	eddyv1.UnimplementedExchangeServer
	log *slog.Logger

	mu    sync.Mutex
	gates map[gateKey]*inputGate
	// newest is the newest attempt of each job ever registered: a channel
	// of an older attempt is refused with ABORTED, not left retrying. One
	// entry per job id the process has run.
	newest map[string]uint32
}

type gateKey struct {
	job     string
	attempt uint32
	task    string
}

// NewExchange returns an Exchange with nothing registered. Register it on a
// gRPC server created with proto/rpc.ServerOptions (keepalive makes a dead
// producer's channel fail instead of hang).
func NewExchange(logger *slog.Logger) *Exchange {
	if logger == nil {
		logger = slog.Default()
	}
	return &Exchange{log: logger, gates: map[gateKey]*inputGate{}, newest: map[string]uint32{}}
}

var _ eddyv1.ExchangeServer = (*Exchange)(nil)

func (x *Exchange) register(d *deployment) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n, ok := x.newest[d.JobID]; ok && n > d.attempt {
		return fmt.Errorf("attempt %d is older than attempt %d, which this worker already runs", d.attempt, n)
	}
	for id := range d.gates {
		if x.gates[gateKey{d.JobID, d.attempt, id}] != nil {
			return fmt.Errorf("task %s of attempt %d already runs on this worker", id, d.attempt)
		}
	}
	for id, g := range d.gates {
		x.gates[gateKey{d.JobID, d.attempt, id}] = g
	}
	x.newest[d.JobID] = d.attempt
	return nil
}

// unregister removes d's gates; Transfer calls still feeding them end with
// ABORTED.
func (x *Exchange) unregister(d *deployment) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, g := range d.gates {
		k := gateKey{d.JobID, d.attempt, id}
		if x.gates[k] == g {
			delete(x.gates, k)
		}
		g.stop()
	}
}

// Transfer receives one channel; see exchange.proto for the protocol.
func (x *Exchange) Transfer(stream grpc.BidiStreamingServer[eddyv1.TransferRequest, eddyv1.TransferResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "exchange: the first message of a Transfer must be a ChannelOpen")
	}
	if open.GetJobId() == "" || open.GetProducerTaskId() == "" || open.GetConsumerTaskId() == "" {
		return status.Errorf(codes.InvalidArgument, "exchange: ChannelOpen without job id, producer or consumer task: %v", open)
	}
	g, in, err := x.openChannel(open)
	if err != nil {
		return err
	}
	if in.addr == "" {
		in.addr = "(unknown)"
		if p, ok := peer.FromContext(stream.Context()); ok {
			in.addr = p.Addr.String()
		}
	}
	err = g.serve(stream, int(open.GetChannelIndex()), in)
	if err != nil && status.Code(err) != codes.Aborted {
		x.log.Debug("exchange: channel ended", "job", open.GetJobId(), "attempt", open.GetAttempt(),
			"producer", open.GetProducerTaskId(), "consumer", open.GetConsumerTaskId(), "channel", open.GetChannelIndex(), "err", err)
	}
	return err
}

// openChannel finds the gate a ChannelOpen names and marks the channel
// open, or returns the status the sender acts on.
func (x *Exchange) openChannel(open *eddyv1.ChannelOpen) (*inputGate, remoteInput, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	job, attempt, consumer := open.GetJobId(), open.GetAttempt(), open.GetConsumerTaskId()
	if n, ok := x.newest[job]; ok && n > attempt {
		return nil, remoteInput{}, status.Errorf(codes.Aborted, "exchange: job %s runs attempt %d here, not %d", job, n, attempt)
	}
	g := x.gates[gateKey{job, attempt, consumer}]
	if g == nil {
		return nil, remoteInput{}, status.Errorf(codes.Unavailable, "exchange: task %s of job %s attempt %d does not run on this worker (yet)", consumer, job, attempt)
	}
	ch := int(open.GetChannelIndex())
	in, ok := g.remote[ch]
	switch {
	case !ok:
		return nil, remoteInput{}, status.Errorf(codes.InvalidArgument, "exchange: task %s has no channel %d from another worker", consumer, ch)
	case in.producer != open.GetProducerTaskId() || in.edge != open.GetEdge():
		return nil, remoteInput{}, status.Errorf(codes.InvalidArgument, "exchange: channel %d of task %s comes from task %s over edge %q, not from task %s over edge %q",
			ch, consumer, in.producer, in.edge, open.GetProducerTaskId(), open.GetEdge())
	case g.opened[ch]:
		return nil, remoteInput{}, status.Errorf(codes.AlreadyExists, "exchange: channel %d of task %s is already open", ch, consumer)
	case g.isStopped():
		return nil, remoteInput{}, status.Errorf(codes.Aborted, "exchange: task %s stopped", consumer)
	}
	g.opened[ch] = true
	return g, in, nil
}

// remoteInput is a channel into a local consumer from a producer task on
// another worker.
type remoteInput struct {
	producer, edge string
	addr           string // the producer's worker, for errors
}

// inputGate is the input queue of one consumer task. Local producers put
// messages into queue themselves; Exchange puts those of remote producers.
type inputGate struct {
	task     string // task id
	taskName string // as errors show it; set before the run starts
	queue    chan message
	window   int // credits granted to a remote channel up front
	remote   map[int]remoteInput
	opened   map[int]bool // guarded by Exchange.mu

	// onFail fails the run and runDone is closed when it stops: both set
	// before the run starts.
	onFail   func(error)
	runDone  <-chan struct{}
	failOnce sync.Once
	failed   chan struct{} // closed by fail
	err      error         // written before failed is closed

	stopOnce sync.Once
	stopped  chan struct{} // closed when the consumer no longer reads
}

func newInputGate(task string, capacity int) *inputGate {
	return &inputGate{task: task, taskName: task, queue: make(chan message, capacity), window: capacity,
		remote: map[int]remoteInput{}, opened: map[int]bool{}, failed: make(chan struct{}), stopped: make(chan struct{})}
}

// fail records the consumer task's error (the first one) and fails the
// run with it.
func (g *inputGate) fail(err error) {
	g.failOnce.Do(func() {
		g.err = err
		close(g.failed)
		if g.onFail != nil {
			g.onFail(fmt.Errorf("task %s: %w", g.taskName, err))
		}
	})
}

// failure returns the error fail recorded, or nil.
func (g *inputGate) failure() error {
	select {
	case <-g.failed:
		return g.err
	default:
		return nil
	}
}

func (g *inputGate) stop() { g.stopOnce.Do(func() { close(g.stopped) }) }

// isStopped reports whether the consumer no longer reads, or is about to
// stop because its run does: then a broken channel is no failure of its.
func (g *inputGate) isStopped() bool {
	select {
	case <-g.stopped:
		return true
	case <-g.runDone:
		return true
	default:
		return false
	}
}

// serve runs the receiving side of one channel, as exchange.proto says:
//
//   - A receive goroutine reads frames as they arrive, decodes them and
//     puts them into a buffer of window slots. A frame that finds the
//     buffer full was sent without credit: RESOURCE_EXHAUSTED.
//   - The handler's goroutine grants the window, then moves each frame from
//     the buffer into the consumer's queue, blocking while the queue is
//     full, and grants one credit per frame moved. A consumer that stops
//     reading thus stops the sender after one window; the channel holds at
//     most window frames here besides the queue.
//
// A malformed frame or a broken call fails the consumer task. A consumer
// that stops ends the call with ABORTED, even while the sender is silent
// (waiting for credit), so that the sender never hangs. Only the handler's
// goroutine sends, so nothing is sent after it returns.
func (g *inputGate) serve(stream grpc.BidiStreamingServer[eddyv1.TransferRequest, eddyv1.TransferResponse], ch int, in remoteInput) error {
	ctx := stream.Context()
	// ended carries the status the receive goroutine ends the call with.
	// It is filled before the consumer is failed, so that the handler,
	// seeing the consumer stop, answers with the cause and not ABORTED.
	ended := make(chan error, 1)
	stopped := func() error {
		select {
		case err := <-ended:
			return err
		default:
			return status.Errorf(codes.Aborted, "exchange: task %s stopped", g.task)
		}
	}
	// refuse ends the call with code and fails the consumer with err,
	// unless the consumer is stopping anyway.
	refuse := func(code codes.Code, err error) error {
		if g.isStopped() {
			return stopped()
		}
		st := status.Errorf(code, "exchange: channel %d of task %s: %v", ch, g.task, err)
		select {
		case ended <- st:
		default:
		}
		g.fail(err)
		return st
	}
	lost := func(cause error) error {
		if status.Code(cause) == codes.Canceled || errors.Is(cause, context.Canceled) {
			// A dead connection looks the same as a cancel from here.
			cause = errors.New("the call was cancelled (the producing task stopped, or its worker is gone)")
		}
		return refuse(codes.Aborted, mark(fmt.Errorf("input from worker %s lost: channel %d from task %s: %s", in.addr, ch, in.producer, describeRPCError(cause)), ErrChannelLost))
	}

	buffer := make(chan message, g.window)
	go func() {
		for {
			req, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				lost(errors.New("the sender closed the channel without end of input"))
				return
			}
			if err != nil {
				lost(err)
				return
			}
			m, code, err := requestMessage(req, ch)
			if err == nil && len(buffer) == cap(buffer) {
				code, err = codes.ResourceExhausted, mark(fmt.Errorf("frame sent without credit (window %d)", g.window), ErrBadFrame)
			}
			if err != nil {
				refuse(code, fmt.Errorf("input from worker %s: channel %d from task %s: %w", in.addr, ch, in.producer, err))
				return
			}
			buffer <- m // never blocks: the buffer had room
			if m.kind == msgEOS {
				return
			}
		}
	}()

	if err := stream.Send(&eddyv1.TransferResponse{Credits: uint32(g.window)}); err != nil {
		return lost(err)
	}
	for {
		var m message
		select {
		case m = <-buffer:
		case err := <-ended:
			return err
		case <-g.stopped:
			return stopped()
		}
		select {
		case g.queue <- m:
		case <-g.stopped:
			return stopped()
		case <-ctx.Done():
			return lost(context.Cause(ctx))
		}
		if m.kind == msgEOS {
			return nil // OK: the whole channel is in the queue
		}
		if err := stream.Send(&eddyv1.TransferResponse{Credits: 1}); err != nil {
			return lost(err)
		}
	}
}

// requestMessage maps a request after the ChannelOpen to a message, or
// says which status refuses it.
func requestMessage(req *eddyv1.TransferRequest, ch int) (message, codes.Code, error) {
	f := req.GetFrame()
	if f == nil {
		return message{}, codes.InvalidArgument, mark(errors.New("a message after the ChannelOpen is not a Frame"), ErrBadFrame)
	}
	m, err := frameMessage(f, ch)
	if err != nil {
		return message{}, codes.InvalidArgument, err
	}
	return m, codes.OK, nil
}

// describeRPCError shortens a gRPC status error to "message (Code)".
func describeRPCError(err error) string {
	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("%s (%s)", st.Message(), st.Code())
	}
	return err.Error()
}

// frameMessage maps a frame received on channel ch to the message the
// consumer's gate reads. The frame comes from the network: every field is
// checked and a bad one is an error wrapping ErrBadFrame, never a panic.
func frameMessage(f *eddyv1.Frame, ch int) (message, error) {
	switch k := f.GetKind().(type) {
	case *eddyv1.Frame_Batch:
		b, err := stream.DecodeBatch(k.Batch)
		if err != nil {
			return message{}, mark(err, ErrBadFrame) // "abi: malformed batch: …"
		}
		if b.Len() == 0 {
			return message{}, mark(errors.New("empty batch frame"), ErrBadFrame)
		}
		return message{kind: msgBatch, channel: ch, batch: b}, nil
	case *eddyv1.Frame_Watermark:
		return message{kind: msgWatermark, channel: ch, wm: k.Watermark}, nil
	case *eddyv1.Frame_Idle:
		return message{kind: msgIdle, channel: ch}, nil
	case *eddyv1.Frame_EndOfInput:
		return message{kind: msgEOS, channel: ch}, nil
	case *eddyv1.Frame_Barrier:
		b := k.Barrier
		id := b.GetCheckpointId()
		if id == 0 || id > math.MaxInt64 {
			return message{}, mark(fmt.Errorf("checkpoint barrier with id %d", id), ErrBadFrame)
		}
		var savepoint bool
		switch b.GetKind() {
		case eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT:
		case eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT:
			savepoint = true
		case eddyv1.CheckpointKind_CHECKPOINT_KIND_SWAP:
			swapID := b.GetSwapId()
			if swapID == 0 || swapID > math.MaxInt64 || b.GetSwapNode() == "" {
				return message{}, mark(fmt.Errorf("swap barrier %d with swap id %d and node %q", id, swapID, b.GetSwapNode()), ErrBadFrame)
			}
			return message{kind: msgBarrier, channel: ch, barrier: &barrier{id: int64(id), savepoint: true, triggered: b.GetTriggeredUnixMs(),
				swapID: int64(swapID), swapNode: b.GetSwapNode()}}, nil
		default:
			return message{}, mark(fmt.Errorf("checkpoint barrier %d of kind %v", id, b.GetKind()), ErrBadFrame)
		}
		if b.GetSwapId() != 0 || b.GetSwapNode() != "" {
			return message{}, mark(fmt.Errorf("checkpoint barrier %d of kind %v names swap %d of node %q", id, b.GetKind(), b.GetSwapId(), b.GetSwapNode()), ErrBadFrame)
		}
		return message{kind: msgBarrier, channel: ch, barrier: &barrier{id: int64(id), savepoint: savepoint, triggered: b.GetTriggeredUnixMs()}}, nil
	case nil:
		return message{}, mark(errors.New("frame without content"), ErrBadFrame)
	default:
		return message{}, mark(fmt.Errorf("unknown frame kind %T", k), ErrBadFrame)
	}
}

// messageFrame is frameMessage's inverse, for the sending side. A batch is
// encoded into fresh bytes: gRPC may hold a sent message after Send.
func messageFrame(m message) *eddyv1.Frame {
	switch m.kind {
	case msgBatch:
		return &eddyv1.Frame{Kind: &eddyv1.Frame_Batch{Batch: abi.AppendBatch(nil, m.batch.Records)}}
	case msgWatermark:
		return &eddyv1.Frame{Kind: &eddyv1.Frame_Watermark{Watermark: m.wm}}
	case msgIdle:
		return &eddyv1.Frame{Kind: &eddyv1.Frame_Idle{Idle: &eddyv1.Idle{}}}
	case msgBarrier:
		b := m.barrier
		kind := eddyv1.CheckpointKind_CHECKPOINT_KIND_CHECKPOINT
		switch {
		case b.swapNode != "":
			kind = eddyv1.CheckpointKind_CHECKPOINT_KIND_SWAP
		case b.savepoint:
			kind = eddyv1.CheckpointKind_CHECKPOINT_KIND_SAVEPOINT
		}
		return &eddyv1.Frame{Kind: &eddyv1.Frame_Barrier{Barrier: &eddyv1.Barrier{
			CheckpointId: uint64(b.id), TriggeredUnixMs: b.triggered, Kind: kind, SwapId: uint64(b.swapID), SwapNode: b.swapNode}}}
	case msgProcessingTime:
		return nil // never sent: remoteOutlet.deliver drops it
	default: // msgEOS
		return &eddyv1.Frame{Kind: &eddyv1.Frame_EndOfInput{EndOfInput: &eddyv1.EndOfInput{}}}
	}
}
