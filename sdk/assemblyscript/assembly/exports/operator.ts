// The exports of an ordinary operator, ABI version 1: the entry file of
// such a module says `export * from "<sdk>/assembly/exports/operator"`.
import { exportAlloc, exportClose, exportOpen, exportProcess } from "../eddy";

export function eddy_abi_version(): i32 { return 1; }
export function eddy_alloc(size: u32): usize { return exportAlloc(size); }
export function eddy_open(ptr: usize, len: u32): i32 { return exportOpen(ptr, len); }
export function eddy_process(ptr: usize, len: u32): i32 { return exportProcess(ptr, len); }
export function eddy_close(): i32 { return exportClose(); }
