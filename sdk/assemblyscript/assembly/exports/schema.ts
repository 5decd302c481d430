// The exports of a keyed operator that uses schema versions of state
// (SchemaValueState, ABI version 4): the entry file says
// `export * from "<sdk>/assembly/exports/schema"`.
import { exportAlloc, exportClose, exportOpen, exportProcess, operator } from "../eddy";
import { exportOnTimer } from "../keyed";

export function eddy_abi_version(): i32 { return 4; }
export function eddy_alloc(size: u32): usize { return exportAlloc(size); }
export function eddy_open(ptr: usize, len: u32): i32 { return exportOpen(ptr, len); }
export function eddy_process(ptr: usize, len: u32): i32 { return exportProcess(ptr, len); }
export function eddy_on_timer(ptr: usize, len: u32): i32 { return exportOnTimer(operator(), ptr, len); }
export function eddy_close(): i32 { return exportClose(); }
