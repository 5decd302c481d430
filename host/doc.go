// Package host runs Eddy operator modules: it compiles and validates
// WebAssembly modules against the operator ABI (package abi, abi/ABI.md)
// and drives one sandboxed instance per task through open, process, finish
// and close, moving records across the boundary one batch per call.
//
// An Engine holds one wazero runtime and its compilation cache and is shared
// by every task of a process. Engine.Compile (or Load) refuses a module that
// does not satisfy the ABI before any task runs it. Module.NewInstance makes
// the per-task Instance; an Instance is driven by one goroutine.
//
//	eng, err := host.NewEngine(ctx, host.DefaultConfig())
//	mod, err := eng.Load(ctx, "enrich.wasm")
//	inst, err := mod.NewInstance(ctx, host.InstanceConfig{Name: "job/enrich[0]"})
//	defer inst.Close()
//	err = inst.Open([]byte(`{"field":"amount"}`))
//	err = inst.Process(batch, func(out []abi.Record) { /* copy out */ })
//	err = inst.Finish(func(out []abi.Record) { /* copy out */ })
//
// On a keyed node (ABI version 2) the task passes its state.Store in
// InstanceConfig.State; the guest's state and timer imports then read and
// write it under the key of the record being handled. The task moves the
// guest's watermark with SetWatermark and hands it the timers that came due
// with OnTimers:
//
//	inst, err := mod.NewInstance(ctx, host.InstanceConfig{Name: "job/alerts[0]", State: store})
//	inst.SetWatermark(wm)
//	err = inst.OnTimers(fired, emit) // one record per timer: key, time, kind
//
// The guest is untrusted. Every pointer it hands the host is bounds-checked,
// each call has a deadline, memory is capped per instance, WASI has no
// filesystem, network, environment or arguments, and guest output goes to
// the task log through a rate limiter. A guest that misbehaves fails its own
// task with one readable error line wrapping one of the Err* sentinels; it
// never takes the process or other tasks down.
//
// # What one task costs the host
//
// With Config's limits, one instance costs the process at most
//
//	MemoryLimit                      its linear memory, in a mapping of its own
//	+ 8 bytes × TableLimit           its tables (wazero's []uintptr)
//	+ MaxEmitBytes                   what the caller copies out of one call
//	+ 80 bytes × MaxEmitRecords      the abi.Record of each record it emits
//	+ the largest batch it is handed, and some 100 KiB of wazero's own
//
// which with the defaults is 64 + 8 + 16 + 20 MiB: some 110 MiB, once a
// call's output has been handed on (the host keeps no emitted record past
// the call: the records alias guest memory). The memory is an anonymous
// mapping reserved at MemoryLimit and resident only in the pages the guest
// writes (memory_unix.go), so growing it copies nothing and closing the
// instance returns it at once: TestHostileModulesAreContained measures a
// memory.grow bomb filling 64 MiB at 64 MiB resident and no Go heap,
// against 336 MiB of heap allocated and 210 MiB resident with wazero's
// default allocator. Tables grow by append, so the garbage of growing one
// to its limit is transient, some 40 MiB for 8 MiB. A call that emits
// beyond MaxEmitBytes or MaxEmitRecords fails with ErrEmitLimit before the
// batch that crosses the bound is decoded (records) or handed on (bytes);
// table.grow past TableLimit fails in the guest, which usually traps.
// Compiled code is shared by the instances of a module and counted once
// per module, not per task.
//
// Package host is not for scheduling tasks, moving records between them,
// storing state or deciding when timers are due (see dataflow and state),
// and it does not decide what a failed task means for its job: it only
// reports the failure.
package host
