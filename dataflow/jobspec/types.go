// Package jobspec is the job specification: the YAML a user writes, decoded
// into plain structs, with every field checked and every error pointing at
// the file and line it comes from.
//
// It is pure data and validation. It does not build or run anything: the
// dataflow package turns a Spec into tasks, connectors turn source and sink
// specs into readers and writers.
package jobspec

import (
	"strings"
	"time"
)

// Spec is a whole job.
type Spec struct {
	Name           string `yaml:"name"`
	Parallelism    int    `yaml:"parallelism"`
	MaxParallelism int    `yaml:"max_parallelism"`
	// BatchSize is the largest number of records in one batch between
	// operators (the unit that crosses the Wasm boundary and the queues).
	BatchSize int `yaml:"batch_size"`
	// BufferTimeout bounds how long a batch that is not full waits in a
	// task's output before it is sent downstream (Flink's buffer timeout):
	// a batch goes when it holds BatchSize records or when BufferTimeout
	// has passed since its first record, whichever comes first. Left out
	// it is DefaultBufferTimeout (100ms); 0 sends every batch as soon as
	// the task produced it (the lowest latency, the smallest batches); a
	// negative value is refused.
	BufferTimeout Duration `yaml:"buffer_timeout"`
	// StateBackend is where keyed state lives: "pebble" (default; larger
	// than memory) or "memory" (small, latency-critical state).
	StateBackend string `yaml:"state_backend"`
	// Checkpoint makes the job take aligned checkpoints (nil: none).
	Checkpoint *CheckpointSpec `yaml:"checkpoint"`
	Nodes      []Node          `yaml:"nodes"`

	// File is where the spec was read from ("" for bytes); relative paths in
	// the spec are resolved against its directory.
	File string `yaml:"-"`
}

// Node is one vertex of the job graph: exactly one of Source, Wasm, Window,
// Join or Sink.
type Node struct {
	Name string `yaml:"name"`
	// Input names the node(s) this one reads; several names are a union. A
	// window's late_output name is also a valid input.
	Input       Inputs      `yaml:"input"`
	Parallelism int         `yaml:"parallelism"`
	Source      *SourceSpec `yaml:"source"`
	// EventTime (sources only) says where event time comes from and how
	// watermarks are generated.
	EventTime *EventTimeSpec `yaml:"event_time"`
	// KeyBy partitions this node's input by key group and makes the node
	// keyed: a top-level JSON field of the value, or "record_key". A wasm
	// node with two inputs may name one per input (key_by: [left, right]),
	// which makes it a two-input operator rather than a union.
	KeyBy KeyFields `yaml:"key_by"`
	Wasm  *WasmSpec `yaml:"wasm"`
	// Window with Aggregate (or Apply) is a built-in keyed window operator.
	Window    *WindowSpec    `yaml:"window"`
	Aggregate *AggregateSpec `yaml:"aggregate"`
	Sink      *SinkSpec      `yaml:"sink"`
	// Join is a built-in join of the node's two inputs.
	Join *JoinSpec `yaml:"join"`

	Line int `yaml:"-"` // line of the node in the spec file
}

// CheckpointSpec configures a job's checkpoints (see
// docs/rfcs/2026-11-30-checkpoints.md).
type CheckpointSpec struct {
	// Interval between the triggers of two checkpoints.
	Interval Duration `yaml:"interval"`
	// Storage is the URL of the checkpoint storage (file:///dir or
	// s3://bucket/prefix); "" means the coordinator's default.
	Storage string `yaml:"storage"`
	// Timeout fails a checkpoint that has not completed by then (default
	// DefaultCheckpointTimeout); MinPause is the least time between the end
	// of one checkpoint and the trigger of the next.
	Timeout  Duration `yaml:"timeout"`
	MinPause Duration `yaml:"min_pause"`
	// Retain is how many completed checkpoints are kept (default
	// DefaultCheckpointRetain).
	Retain int `yaml:"retain"`
}

// Checkpoint defaults.
const (
	DefaultCheckpointTimeout = Duration(10 * time.Minute)
	DefaultCheckpointRetain  = 3
)

// RecordKey as key_by keys by the record's own key.
const RecordKey = "record_key"

// EventTimeSpec configures timestamps and bounded-out-of-orderness
// watermarks, as Flink's WatermarkStrategy.forBoundedOutOfOrderness.
type EventTimeSpec struct {
	// Field is a top-level JSON field holding ms since the epoch; empty
	// keeps the timestamp the source set.
	Field             string   `yaml:"field"`
	MaxOutOfOrderness Duration `yaml:"max_out_of_orderness"`
	// IdleTimeout marks a source subtask idle when it produced nothing for
	// this long, so it stops holding back the watermark downstream.
	IdleTimeout Duration `yaml:"idle_timeout"`
}

// WindowSpec is exactly one window kind plus lateness handling.
type WindowSpec struct {
	Tumbling *Duration    `yaml:"tumbling"`
	Sliding  *SlidingSpec `yaml:"sliding"`
	Session  *SessionSpec `yaml:"session"`
	Global   *GlobalSpec  `yaml:"global"`
	// AllowedLateness keeps a window's state after it fired; a record that
	// arrives within it re-fires the window with the updated result.
	AllowedLateness Duration `yaml:"allowed_lateness"`
	// LateOutput names the side output that records later than that go to.
	LateOutput string `yaml:"late_output"`
}

// SlidingSpec is a window of Size every Slide.
type SlidingSpec struct {
	Size  Duration `yaml:"size"`
	Slide Duration `yaml:"slide"`
}

// SessionSpec closes a key's session after Gap without records.
type SessionSpec struct {
	Gap Duration `yaml:"gap"`
}

// GlobalSpec is one window per key, fired by its trigger.
type GlobalSpec struct {
	Trigger struct {
		Count int64 `yaml:"count"`
	} `yaml:"trigger"`
}

// AggregateSpec is built-in aggregates ("count", "sum(field)", "min(field)",
// "max(field)", "avg(field)"), or a Wasm aggregate, or a Wasm window function
// given all of a window's elements.
type AggregateSpec struct {
	Builtins []string
	Wasm     *WasmSpec `yaml:"wasm"`
	Apply    *WasmSpec `yaml:"apply"`
	// Name is the field of a window result that holds a Wasm aggregate's
	// result; default DefaultAggregateName.
	Name string `yaml:"name"`
}

// DefaultAggregateName is the result field of a Wasm aggregate without a
// name.
const DefaultAggregateName = "result"

// KeyFields is key_by: one key field for every input, or a list with one
// per input, in input order.
type KeyFields []string

// PerInput reports whether the key_by names a key per input (a list of
// two): the node is a two-input operator.
func (k KeyFields) PerInput() bool { return len(k) > 1 }

// String is the key_by as written: the field, or [a, b].
func (k KeyFields) String() string {
	switch len(k) {
	case 0:
		return ""
	case 1:
		return k[0]
	}
	return "[" + strings.Join(k, ", ") + "]"
}

// Inputs is a node name or a list of them.
type Inputs []string

// WasmSpec names an operator module and its configuration.
type WasmSpec struct {
	// Module is a path to a .wasm file (relative to the spec file) or, on a
	// cluster, a registry name[@version].
	Module string `yaml:"module"`
	// Config is handed to the module's eddy_open as JSON.
	Config map[string]any `yaml:"config"`

	Line int `yaml:"-"`
}

// SourceSpec is exactly one source connector.
type SourceSpec struct {
	Generator *GeneratorSpec   `yaml:"generator"`
	File      *FileSourceSpec  `yaml:"file"`
	Kafka     *KafkaSourceSpec `yaml:"kafka"`
}

// SinkSpec is exactly one sink connector.
type SinkSpec struct {
	File    *FileSinkSpec  `yaml:"file"`
	Stdout  *StdoutSpec    `yaml:"stdout"`
	Discard *DiscardSpec   `yaml:"discard"`
	Kafka   *KafkaSinkSpec `yaml:"kafka"`
}

// Generator kinds.
const (
	GeneratorSequence     = "sequence"
	GeneratorTransactions = "transactions"
	GeneratorNexmark      = "nexmark"
)

// GeneratorSpec configures the seeded data generator.
type GeneratorSpec struct {
	// Kind is "sequence" ({"seq": n}), "transactions" (card, amount,
	// country, merchant, ts) or "nexmark" (the Nexmark benchmark's person,
	// auction and bid events).
	Kind string `yaml:"kind"`
	// Count is the number of records over all subtasks; 0 is unbounded.
	Count int64 `yaml:"count"`
	// Rate is records per second over all subtasks; 0 is as fast as possible.
	Rate float64 `yaml:"rate"`
	Seed int64   `yaml:"seed"`
	// Cards is the number of distinct cards (transactions only); default
	// 1000.
	Cards int `yaml:"cards"`
	// Start is the event time of the first record (RFC 3339); default
	// 2026-01-01T00:00:00Z so that runs are reproducible.
	Start string `yaml:"start"`
	// Interval is the event-time step between consecutive records: record
	// n has event time Start + n×Interval before Disorder. Default 1ms for
	// sequence, 100ms for transactions.
	Interval Duration `yaml:"interval"`
	// Disorder moves each record's event time back by a seeded random
	// amount up to this bound, so records arrive out of order.
	Disorder Duration `yaml:"disorder"`
	// LateFraction of records (0..1) are moved back by more than Disorder,
	// up to 4×Disorder, instead, so that some arrive later than a watermark
	// allows. It needs a Disorder of at least 1ms.
	LateFraction float64 `yaml:"late_fraction"`
	// Nexmark tunes the Nexmark model (kind nexmark only); zero fields
	// keep Nexmark's defaults.
	Nexmark *NexmarkSpec `yaml:"nexmark"`
	// Realtime paces the source by event time instead of by Rate: record
	// n is produced no earlier than Start + n×Interval on the wall clock,
	// and a source held back catches up on what fell due meanwhile, as a
	// backlog in a log would be read (Nexmark's generator paces so). A
	// record's event time then tells when it entered the job, so sinks
	// measure end-to-end latency from it. A Rate with no Interval sets the
	// interval to 1s/Rate; giving both is refused. A Start in the past is
	// a backlog produced as fast as possible.
	Realtime bool `yaml:"realtime"`
}

// NexmarkSpec is the Nexmark model's configuration (GeneratorConfig of
// the Nexmark benchmark). Every field's zero value is Nexmark's default.
type NexmarkSpec struct {
	// Proportions of person, auction and bid events; default 1:3:46.
	PersonProportion  int `yaml:"person_proportion"`
	AuctionProportion int `yaml:"auction_proportion"`
	BidProportion     int `yaml:"bid_proportion"`
	// Hot ratios: a bid goes to the hot auction with probability
	// 1 − 1/HotAuctionRatio (default 2), and likewise the hot bidder
	// (default 4) and an auction's hot seller (default 4).
	HotAuctionRatio int `yaml:"hot_auction_ratio"`
	HotBiddersRatio int `yaml:"hot_bidders_ratio"`
	HotSellersRatio int `yaml:"hot_sellers_ratio"`
	// InFlightAuctions is how many of the newest auctions bids go to
	// (default 100); ActivePeople how many of the newest people bid and
	// sell (default 1000).
	InFlightAuctions int `yaml:"in_flight_auctions"`
	ActivePeople     int `yaml:"active_people"`
	// Average event sizes in bytes, reached by padding the extra field;
	// default 200, 500 and 100.
	AvgPersonBytes  int `yaml:"avg_person_bytes"`
	AvgAuctionBytes int `yaml:"avg_auction_bytes"`
	AvgBidBytes     int `yaml:"avg_bid_bytes"`
}

// FileSourceSpec reads JSON lines.
type FileSourceSpec struct {
	Path string `yaml:"path"`
	// KeyField, when set, copies that JSON field of each line into the key.
	KeyField string `yaml:"key_field"`
	// TimestampField, when set, reads event time (ms, or RFC 3339) from it.
	TimestampField string `yaml:"timestamp_field"`
}

// Kafka source start positions.
const (
	KafkaStartEarliest  = "earliest"
	KafkaStartLatest    = "latest"
	KafkaStartTimestamp = "timestamp" // the first offset at or after StartTimestamp
	KafkaStartGroup     = "group"     // the group's committed offsets
)

// KafkaSourceSpec reads one or more Kafka topics. Partitions are split over
// the source's parallel instances (instance i of p reads the partitions
// whose number modulo p is i); offsets are kept in checkpoints.
type KafkaSourceSpec struct {
	// Brokers are bootstrap host:port addresses.
	Brokers []string `yaml:"brokers"`
	// Topics names the topics; TopicPattern instead matches topic names
	// with an RE2 regular expression (anchored: the whole name matches),
	// resolved when the source opens. Exactly one of the two is set.
	Topics       []string `yaml:"topics"`
	TopicPattern string   `yaml:"topic_pattern"`
	// Start is "earliest" (the default), "latest", "timestamp" (the first
	// record at or after StartTimestamp) or "group" (Group's committed
	// offsets; partitions it has none for start at the earliest). It
	// applies when the job does not start from a checkpoint.
	Start string `yaml:"start"`
	// StartTimestamp is RFC 3339 or milliseconds since the epoch.
	StartTimestamp string `yaml:"start_timestamp"`
	// Group is a consumer group: with start: group the source starts at
	// its committed offsets, and whenever a checkpoint completes the
	// source commits the checkpoint's offsets to it (for monitoring and
	// for start: group; Eddy restores from its checkpoints, not from the
	// group). The source does not join the group.
	Group string `yaml:"group"`
	// SASL and TLS secure the connections (both optional).
	SASL *KafkaSASL `yaml:"sasl"`
	TLS  *KafkaTLS  `yaml:"tls"`
	// Isolation is "read_committed" (the default: records of aborted
	// transactions are skipped, and a partition is read up to its first
	// open transaction, as the output of an exactly-once sink must be
	// read) or "read_uncommitted" (everything written, aborted included).
	Isolation string `yaml:"isolation"`
	// StopAt "latest" makes the source bounded, as Flink's setBounded: it
	// ends once it has read every partition up to the end offset it had
	// when the job first started (kept in checkpoints, so a restored job
	// stops at the same place). Empty: unbounded. A bounded source does
	// not look for new partitions.
	StopAt string `yaml:"stop_at"`
	// DiscoveryInterval is how often the source looks for partitions
	// added to its topics, and for new topics topic_pattern matches; they
	// are read from their earliest offset. Default 30s; 0 turns it off.
	DiscoveryInterval *Duration `yaml:"discovery_interval"`
}

// KafkaStopAtLatest is the one stop_at of a bounded Kafka source.
const KafkaStopAtLatest = "latest"

// Kafka source isolation levels.
const (
	KafkaReadCommitted   = "read_committed"
	KafkaReadUncommitted = "read_uncommitted"
)

// Kafka sink delivery guarantees.
const (
	KafkaAtLeastOnce = "at_least_once"
	KafkaExactlyOnce = "exactly_once"
)

// KafkaSinkSpec writes records to a Kafka topic: the record's key (or
// KeyField), value, headers and timestamp.
type KafkaSinkSpec struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	// Delivery is "at_least_once" (the default: records are flushed when
	// a checkpoint is taken) or "exactly_once" (records are written in
	// Kafka transactions committed when the checkpoint completes; needs a
	// checkpoint section, and consumers reading with read_committed).
	Delivery string `yaml:"delivery"`
	// TransactionalIDPrefix names the sink's transactions: ids are
	// PREFIX-SUBTASK-N. Default eddy-JOBID-NODE. Two running jobs must not
	// share a prefix.
	TransactionalIDPrefix string `yaml:"transactional_id_prefix"`
	// TransactionTimeout is how long the broker keeps a transaction open
	// before aborting it; it must exceed the checkpoint interval plus the
	// time a checkpoint takes. Default 60s; the broker caps it
	// (transaction.max.timeout.ms, 15 minutes by default).
	TransactionTimeout Duration `yaml:"transaction_timeout"`
	// KeyField, when set, takes the Kafka key from this top-level JSON
	// field of the value instead of the record's key.
	KeyField string `yaml:"key_field"`
	// SASL and TLS secure the connections (both optional).
	SASL *KafkaSASL `yaml:"sasl"`
	TLS  *KafkaTLS  `yaml:"tls"`
}

// KafkaSASL authenticates a Kafka client with SASL.
type KafkaSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	// PasswordEnv names the environment variable that holds the password.
	// Each worker reads it when the task opens: a job spec, which the
	// coordinator stores and shows, carries no secret.
	PasswordEnv string `yaml:"password_env"`
}

// KafkaTLS makes a Kafka client connect with TLS.
type KafkaTLS struct {
	// CAFile is a PEM file of the certificate authorities to trust, on
	// the workers; empty trusts the system's.
	CAFile string `yaml:"ca_file"`
	// ServerName overrides the name the brokers' certificates are checked
	// against (default: the host of each broker address).
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate: for tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL mechanisms of Kafka clients.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// FileSinkSpec writes one JSON value per line.
type FileSinkSpec struct {
	Path string `yaml:"path"`
}

// StdoutSpec prints records, one per line.
type StdoutSpec struct {
	// Prefix is printed before each record.
	Prefix string `yaml:"prefix"`
}

// DiscardSpec drops every record (benchmarks).
type DiscardSpec struct{}

// Duration is a time.Duration written as "10s", "1m30s" or milliseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Modules lists the Wasm modules a node runs.
func (n *Node) Modules() []*WasmSpec {
	var ms []*WasmSpec
	if n.Wasm != nil {
		ms = append(ms, n.Wasm)
	}
	if a := n.Aggregate; a != nil {
		for _, w := range []*WasmSpec{a.Wasm, a.Apply} {
			if w != nil {
				ms = append(ms, w)
			}
		}
	}
	return ms
}

// JoinSpec is a built-in join of a node's two inputs (input: [left,
// right]), keyed by LeftKey on the first and RightKey on the second, with
// exactly one of Interval or Window. A joined record's value is
// {"left": <left value>, "right": <right value>}; its key is the join key.
type JoinSpec struct {
	// LeftKey and RightKey are a top-level JSON field (or record_key) of
	// the left and of the right input's values.
	LeftKey  string            `yaml:"left_key"`
	RightKey string            `yaml:"right_key"`
	Interval *IntervalJoinSpec `yaml:"interval"`
	Window   *WindowSpec       `yaml:"window"`
}

// IntervalJoinSpec joins a left record at tl with every right record of
// the same key at tr with tl+Lower ≤ tr ≤ tl+Upper (Flink's interval
// join). Both bounds are inclusive unless set false.
type IntervalJoinSpec struct {
	Lower          SignedDuration `yaml:"lower"`
	Upper          SignedDuration `yaml:"upper"`
	LowerInclusive *bool          `yaml:"lower_inclusive"`
	UpperInclusive *bool          `yaml:"upper_inclusive"`
}

// SignedDuration is a Duration that may be negative ("-5s"), for interval
// join bounds.
type SignedDuration Duration

// D is the duration as a time.Duration.
func (d SignedDuration) D() time.Duration { return time.Duration(d) }

// Keyed reports whether the node partitions its input by key and keeps
// keyed state: a key_by, or a join (keyed per input).
func (n *Node) Keyed() bool { return len(n.KeyBy) > 0 || n.Join != nil }

// InputKey is the key field input i of n is partitioned by: key_by, or a
// join's left_key (input 0) or right_key (input 1).
func (n *Node) InputKey(i int) string {
	if n.Join == nil {
		switch {
		case len(n.KeyBy) == 0:
			return ""
		case n.KeyBy.PerInput():
			return n.KeyBy[i]
		}
		return n.KeyBy[0]
	}
	if i == 0 {
		return n.Join.LeftKey
	}
	return n.Join.RightKey
}
