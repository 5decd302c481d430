// The exports of a one-input operator that declares fields (fields.ts),
// ABI version 7, which includes keyed state and timers (2) and schema
// versions (4): the entry file says
// `export * from "<sdk>/assembly/exports/fields"`. It exports
// eddy_on_timer for a KeyedOperator; the host hands timers only to a
// keyed node's module, and only those it set.
import { exportAlloc, exportClose, exportOpen, exportProcess, operator } from "../eddy";
import { exportOnTimer } from "../keyed";

export function eddy_abi_version(): i32 { return 7; }
export function eddy_alloc(size: u32): usize { return exportAlloc(size); }
export function eddy_open(ptr: usize, len: u32): i32 { return exportOpen(ptr, len); }
export function eddy_process(ptr: usize, len: u32): i32 { return exportProcess(ptr, len); }
export function eddy_on_timer(ptr: usize, len: u32): i32 { return exportOnTimer(operator(), ptr, len); }
export function eddy_close(): i32 { return exportClose(); }
