// host.ts - the imports of module "eddy" (abi/ABI.md). Only the ones a
// module calls end up in its import section: asc drops the rest, so a
// version 1 operator never imports a version 2 name.

@external("eddy", "emit")
export declare function hostEmit(batch: usize, len: u32): void;
@external("eddy", "log")
export declare function hostLog(level: i32, ptr: usize, len: u32): void;
@external("eddy", "fail")
export declare function hostFail(ptr: usize, len: u32): void;

@external("eddy", "fields")
export declare function hostFields(list: usize, len: u32): void;

@external("eddy", "state_declare")
export declare function hostStateDeclare(kind: i32, name: usize, nameLen: u32, ttlMs: i64): i32;
@external("eddy", "state_declare2")
export declare function hostStateDeclare2(kind: i32, name: usize, nameLen: u32, ttlMs: i64, schema: u32): i32;
@external("eddy", "state_get")
export declare function hostStateGet(id: i32, key: usize, keyLen: u32, dst: usize, cap: u32): i32;
@external("eddy", "state_get2")
export declare function hostStateGet2(id: i32, key: usize, keyLen: u32, dst: usize, cap: u32, schema: usize): i32;
@external("eddy", "state_put")
export declare function hostStatePut(id: i32, key: usize, keyLen: u32, val: usize, valLen: u32): void;
@external("eddy", "state_clear")
export declare function hostStateClear(id: i32, key: usize, keyLen: u32): void;
@external("eddy", "state_append")
export declare function hostStateAppend(id: i32, key: usize, keyLen: u32, val: usize, valLen: u32): void;
@external("eddy", "state_list")
export declare function hostStateList(id: i32, key: usize, keyLen: u32, dst: usize, cap: u32): i32;
@external("eddy", "state_map_get")
export declare function hostStateMapGet(id: i32, key: usize, keyLen: u32, uk: usize, ukLen: u32, dst: usize, cap: u32): i32;
@external("eddy", "state_map_put")
export declare function hostStateMapPut(id: i32, key: usize, keyLen: u32, uk: usize, ukLen: u32, val: usize, valLen: u32): void;
@external("eddy", "state_map_delete")
export declare function hostStateMapDelete(id: i32, key: usize, keyLen: u32, uk: usize, ukLen: u32): void;
@external("eddy", "state_map_entries")
export declare function hostStateMapEntries(id: i32, key: usize, keyLen: u32, dst: usize, cap: u32): i32;
@external("eddy", "timer_register")
export declare function hostTimerRegister(kind: i32, key: usize, keyLen: u32, ts: i64): void;
@external("eddy", "timer_delete")
export declare function hostTimerDelete(kind: i32, key: usize, keyLen: u32, ts: i64): void;
@external("eddy", "current_watermark")
export declare function hostCurrentWatermark(): i64;
@external("eddy", "processing_time")
export declare function hostProcessingTime(): i64;
