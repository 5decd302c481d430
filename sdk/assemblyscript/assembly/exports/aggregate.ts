// The exports of an aggregate module, ABI version 3: the entry file says
// `export * from "<sdk>/assembly/exports/aggregate"`. There is no
// eddy_process: a window node calls the eddy_agg_* functions.
import { exportAlloc, exportClose, exportOpen } from "../eddy";
import { exportAggAdd, exportAggCreate, exportAggMerge, exportAggProcess, exportAggResult } from "../aggregate";

export function eddy_abi_version(): i32 { return 3; }
export function eddy_alloc(size: u32): usize { return exportAlloc(size); }
export function eddy_open(ptr: usize, len: u32): i32 { return exportOpen(ptr, len); }
export function eddy_agg_create(): i32 { return exportAggCreate(); }
export function eddy_agg_add(ptr: usize, len: u32): i32 { return exportAggAdd(ptr, len); }
export function eddy_agg_merge(ptr: usize, len: u32): i32 { return exportAggMerge(ptr, len); }
export function eddy_agg_result(ptr: usize, len: u32): i32 { return exportAggResult(ptr, len); }
export function eddy_close(): i32 { return exportClose(); }

// Optional for an aggregate module; exported so that a module used as an
// ordinary operator by mistake says what it is.
export function eddy_process(ptr: usize, len: u32): i32 { return exportAggProcess(); }
