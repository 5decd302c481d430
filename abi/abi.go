// Package abi is the contract between the Eddy host and a Wasm operator
// module: the names and signatures of exports and imports, the status
// codes, and the batch encoding records cross the boundary in.
//
// It is pure Go with no dependencies so that both the host (package host)
// and the Go guest SDK (sdk/go, compiled to wasip1) import the same code.
// ABI.md beside this file is the normative specification; this package
// implements it and must not drift from it.
//
// It is not for running modules (see host) nor for moving records between
// tasks (see dataflow): the batch codec here is only the wire shape of the
// Wasm boundary.
package abi

// Version is the newest ABI version this package describes. A module
// declares the version it was built against by exporting ExportABIVersion;
// version 2 adds keyed state, timers and time (ABI.md, "Version 2").
// version 3 adds aggregate modules (ABI.md, "Version 3"); version 4 adds
// schema versions of state values (ABI.md, "Version 4"); version 5 adds
// two-input keyed operators (ABI.md, "Version 5"); version 6 adds fields
// the host extracts (ABI.md, "Version 6", fields.go); version 7 adds
// values in parts and numbers the host parses (ABI.md, "Version 7",
// parts.go).
const Version = 7

// SupportedVersions lists every ABI version the host accepts.
var SupportedVersions = []uint32{1, 2, 3, 4, 5, 6, 7}

// TwoInputVersion is the least version of a two-input module, one that
// exports ExportProcess2.
const TwoInputVersion = 5

// AggregateVersion is the least version of an aggregate module.
const AggregateVersion = 3

// ImportModule is the Wasm import module name of every Eddy host function.
const ImportModule = "eddy"

// WASIModule is the import module name of the WASI preview 1 functions the
// host provides (without filesystem, network or environment).
const WASIModule = "wasi_snapshot_preview1"

// Exports a module must (or may) define.
const (
	ExportMemory     = "memory"
	ExportABIVersion = "eddy_abi_version" // () -> i32
	ExportAlloc      = "eddy_alloc"       // (size i32) -> ptr i32
	ExportOpen       = "eddy_open"        // (cfg_ptr i32, cfg_len i32) -> status i32
	ExportProcess    = "eddy_process"     // (batch_ptr i32, batch_len i32) -> status i32
	ExportClose      = "eddy_close"       // () -> status i32
	// ExportInitialize is the optional reactor initializer emitted by
	// wasi-libc and the Go toolchain; the host calls it once before anything else.
	ExportInitialize = "_initialize" // () -> ()
	// ExportOnTimer (version 2) receives the timers that fired, as a batch;
	// optional, but required of a module that imports ImportTimerRegister.
	ExportOnTimer = "eddy_on_timer" // (batch_ptr i32, batch_len i32) -> status i32
	// ExportProcess2 (version 5) makes a module a two-input operator: the
	// host hands it every batch of either input, with the input's index
	// (0 or 1), and never calls ExportProcess.
	ExportProcess2 = "eddy_process2" // (input i32, batch_ptr i32, batch_len i32) -> status i32

	// Aggregate modules (version 3) export these in place of
	// ExportProcess; see AggregateExports.
	ExportAggCreate = "eddy_agg_create" // () -> status i32
	ExportAggAdd    = "eddy_agg_add"    // (batch_ptr i32, batch_len i32) -> status i32
	ExportAggMerge  = "eddy_agg_merge"  // (batch_ptr i32, batch_len i32) -> status i32
	ExportAggResult = "eddy_agg_result" // (batch_ptr i32, batch_len i32) -> status i32
)

// AggregateExports are the functions that make a module an aggregate
// module (ABI.md, "Aggregate modules"): it must export all of them, and
// then need not export ExportProcess.
var AggregateExports = map[string]Signature{
	ExportAggCreate: {Results: []ValType{I32}},
	ExportAggAdd:    {Params: []ValType{I32, I32}, Results: []ValType{I32}},
	ExportAggMerge:  {Params: []ValType{I32, I32}, Results: []ValType{I32}},
	ExportAggResult: {Params: []ValType{I32, I32}, Results: []ValType{I32}},
}

// GroupHeaderKeyLen is the key length of a group header record in the
// batches of ExportAggAdd and ExportAggMerge: a little-endian u32, the
// number of member records that follow.
const GroupHeaderKeyLen = 4

// WindowDescriptorLen is the value length of record 0 of a window
// function's batch: the window's start and end as little-endian i64.
const WindowDescriptorLen = 16

// Imports in module ImportModule that the host provides.
const (
	ImportEmit = "emit" // (batch_ptr i32, batch_len i32) -> ()
	ImportLog  = "log"  // (level i32, ptr i32, len i32) -> ()
	ImportFail = "fail" // (ptr i32, len i32) -> ()
)

// Imports added by version 2: keyed state, timers and time. Only a module
// that declares version 2 or later may import them (see ImportVersion).
const (
	ImportStateDeclare    = "state_declare"     // (kind i32, name_ptr i32, name_len i32, ttl_ms i64) -> id i32
	ImportStateGet        = "state_get"         // (id, key_ptr, key_len, dst_ptr, dst_cap i32) -> len i32
	ImportStatePut        = "state_put"         // (id, key_ptr, key_len, val_ptr, val_len i32) -> ()
	ImportStateClear      = "state_clear"       // (id, key_ptr, key_len i32) -> ()
	ImportStateAppend     = "state_append"      // (id, key_ptr, key_len, val_ptr, val_len i32) -> ()
	ImportStateList       = "state_list"        // (id, key_ptr, key_len, dst_ptr, dst_cap i32) -> len i32
	ImportStateMapGet     = "state_map_get"     // (id, key_ptr, key_len, uk_ptr, uk_len, dst_ptr, dst_cap i32) -> len i32
	ImportStateMapPut     = "state_map_put"     // (id, key_ptr, key_len, uk_ptr, uk_len, val_ptr, val_len i32) -> ()
	ImportStateMapDelete  = "state_map_delete"  // (id, key_ptr, key_len, uk_ptr, uk_len i32) -> ()
	ImportStateMapEntries = "state_map_entries" // (id, key_ptr, key_len, dst_ptr, dst_cap i32) -> len i32
	ImportTimerRegister   = "timer_register"    // (kind i32, key_ptr i32, key_len i32, ts i64) -> ()
	ImportTimerDelete     = "timer_delete"      // (kind i32, key_ptr i32, key_len i32, ts i64) -> ()
	ImportWatermark       = "current_watermark" // () -> i64
	ImportProcessingTime  = "processing_time"   // () -> i64
)

// Imports added by version 4: schema versions of state values. A module
// declares the schema version of the values it writes to a state, and
// reads back with each value the version it was written with, so that a new
// version of an operator can convert what an older one stored.
const (
	ImportStateDeclare2 = "state_declare2" // (kind i32, name_ptr i32, name_len i32, ttl_ms i64, schema i32) -> id i32
	ImportStateGet2     = "state_get2"     // (id, key_ptr, key_len, dst_ptr, dst_cap, schema_ptr i32) -> len i32
)

// State kinds, the kind argument of ImportStateDeclare.
const (
	StateValue = 0
	StateList  = 1
	StateMap   = 2
)

// Timer kinds: the kind argument of ImportTimerRegister and
// ImportTimerDelete, and the one-byte value of a fired timer's record.
const (
	TimerEventTime      = 0
	TimerProcessingTime = 1
)

// StateAbsent is what the state reads return for a missing value, an empty
// list or an empty map.
const StateAbsent = -1

// NoWatermark is what ImportWatermark returns before the task's first
// watermark.
const NoWatermark int64 = -1 << 63

// ValType is a Wasm value type as it appears in a signature.
type ValType byte

// The Wasm value types used by the ABI (same encoding as the binary format).
const (
	I32 ValType = 0x7f
	I64 ValType = 0x7e
)

// Signature is a function type: parameter and result types.
type Signature struct {
	Params  []ValType
	Results []ValType
}

// RequiredExports are the functions every module must export, with their
// exact signatures.
var RequiredExports = map[string]Signature{
	ExportABIVersion: {Results: []ValType{I32}},
	ExportAlloc:      {Params: []ValType{I32}, Results: []ValType{I32}},
	ExportOpen:       {Params: []ValType{I32, I32}, Results: []ValType{I32}},
	ExportProcess:    {Params: []ValType{I32, I32}, Results: []ValType{I32}},
	ExportClose:      {Results: []ValType{I32}},
}

// OptionalExports may be exported; if they are, the signature must match.
var OptionalExports = map[string]Signature{
	ExportInitialize: {},
	ExportOnTimer:    {Params: []ValType{I32, I32}, Results: []ValType{I32}},
	ExportProcess2:   {Params: []ValType{I32, I32, I32}, Results: []ValType{I32}},
}

// HostImports are the functions of module ImportModule a module may import,
// of every supported version; ImportVersion says which version each needs.
var HostImports = map[string]Signature{
	ImportEmit: {Params: []ValType{I32, I32}},
	ImportLog:  {Params: []ValType{I32, I32, I32}},
	ImportFail: {Params: []ValType{I32, I32}},

	ImportStateDeclare:    {Params: []ValType{I32, I32, I32, I64}, Results: []ValType{I32}},
	ImportStateGet:        {Params: []ValType{I32, I32, I32, I32, I32}, Results: []ValType{I32}},
	ImportStatePut:        {Params: []ValType{I32, I32, I32, I32, I32}},
	ImportStateClear:      {Params: []ValType{I32, I32, I32}},
	ImportStateAppend:     {Params: []ValType{I32, I32, I32, I32, I32}},
	ImportStateList:       {Params: []ValType{I32, I32, I32, I32, I32}, Results: []ValType{I32}},
	ImportStateMapGet:     {Params: []ValType{I32, I32, I32, I32, I32, I32, I32}, Results: []ValType{I32}},
	ImportStateMapPut:     {Params: []ValType{I32, I32, I32, I32, I32, I32, I32}},
	ImportStateMapDelete:  {Params: []ValType{I32, I32, I32, I32, I32}},
	ImportStateMapEntries: {Params: []ValType{I32, I32, I32, I32, I32}, Results: []ValType{I32}},
	ImportTimerRegister:   {Params: []ValType{I32, I32, I32, I64}},
	ImportTimerDelete:     {Params: []ValType{I32, I32, I32, I64}},
	ImportWatermark:       {Results: []ValType{I64}},
	ImportProcessingTime:  {Results: []ValType{I64}},

	ImportStateDeclare2: {Params: []ValType{I32, I32, I32, I64, I32}, Results: []ValType{I32}},
	ImportStateGet2:     {Params: []ValType{I32, I32, I32, I32, I32, I32}, Results: []ValType{I32}},

	ImportFields: {Params: []ValType{I32, I32}},
}

// ImportVersion returns the ABI version that introduced the host import
// name, which is the least version a module importing it must declare; 0
// for a name that is not a host import.
func ImportVersion(name string) uint32 { return importVersions[name] }

var importVersions = map[string]uint32{
	ImportEmit: 1,
	ImportLog:  1,
	ImportFail: 1,

	ImportStateDeclare:    2,
	ImportStateGet:        2,
	ImportStatePut:        2,
	ImportStateClear:      2,
	ImportStateAppend:     2,
	ImportStateList:       2,
	ImportStateMapGet:     2,
	ImportStateMapPut:     2,
	ImportStateMapDelete:  2,
	ImportStateMapEntries: 2,
	ImportTimerRegister:   2,
	ImportTimerDelete:     2,
	ImportWatermark:       2,
	ImportProcessingTime:  2,

	ImportStateDeclare2: 4,
	ImportStateGet2:     4,

	ImportFields: FieldsVersion,
}

// Status codes returned by eddy_open, eddy_process, eddy_on_timer, the
// eddy_agg_* calls and eddy_close.
const (
	StatusOK    = 0 // success
	StatusError = 1 // the operator failed; the message was set with fail
)

// Log levels accepted by the log import.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// NoTimestamp marks a record that carries no event time.
const NoTimestamp int64 = -1 << 63
