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

// Version is the ABI version this package describes. A module declares the
// version it was built against by exporting ExportABIVersion.
const Version = 1

// SupportedVersions lists every ABI version the host accepts.
var SupportedVersions = []uint32{1}

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
)

// Imports in module ImportModule that the host provides.
const (
	ImportEmit = "emit" // (batch_ptr i32, batch_len i32) -> ()
	ImportLog  = "log"  // (level i32, ptr i32, len i32) -> ()
	ImportFail = "fail" // (ptr i32, len i32) -> ()
)

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
}

// HostImports are the functions of module ImportModule a module may import.
var HostImports = map[string]Signature{
	ImportEmit: {Params: []ValType{I32, I32}},
	ImportLog:  {Params: []ValType{I32, I32, I32}},
	ImportFail: {Params: []ValType{I32, I32}},
}

// Status codes returned by eddy_open, eddy_process and eddy_close.
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
