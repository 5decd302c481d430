// The exports of a two-input keyed operator (KeyedCoOperator) that
// declares fields (fields.ts), ABI version 7, which includes two inputs
// (5), keyed state and timers (2) and schema versions (4): the entry
// file says `export * from "<sdk>/assembly/exports/keyedcofields"`.
import { exportAlloc, exportClose, exportOpen, operator } from "../eddy";
import { exportOnTimer } from "../keyed";
import { exportProcess2, exportProcessTwoInput } from "../keyedco";

export function eddy_abi_version(): i32 { return 7; }
export function eddy_alloc(size: u32): usize { return exportAlloc(size); }
export function eddy_open(ptr: usize, len: u32): i32 { return exportOpen(ptr, len); }
export function eddy_process(ptr: usize, len: u32): i32 { return exportProcessTwoInput(ptr, len); }
export function eddy_process2(input: u32, ptr: usize, len: u32): i32 { return exportProcess2(input, ptr, len); }
export function eddy_on_timer(ptr: usize, len: u32): i32 { return exportOnTimer(operator(), ptr, len); }
export function eddy_close(): i32 { return exportClose(); }
