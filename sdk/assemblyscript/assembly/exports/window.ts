// The exports of a window function, an ordinary operator of ABI version 1
// whose eddy_process gets a whole window: the entry file says
// `export * from "<sdk>/assembly/exports/window"`.
import { exportAlloc, exportClose, exportOpen } from "../eddy";
import { exportWindowProcess } from "../window";

export function eddy_abi_version(): i32 { return 1; }
export function eddy_alloc(size: u32): usize { return exportAlloc(size); }
export function eddy_open(ptr: usize, len: u32): i32 { return exportOpen(ptr, len); }
export function eddy_process(ptr: usize, len: u32): i32 { return exportWindowProcess(ptr, len); }
export function eddy_close(): i32 { return exportClose(); }
