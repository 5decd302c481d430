//! The host's imports (module `eddy`), wrapped in safe functions over
//! slices. The linker drops the imports a module does not call, so an
//! operator without timers imports no `timer_register`, as ABI.md expects.

mod raw {
    #[link(wasm_import_module = "eddy")]
    extern "C" {
        #[link_name = "emit"]
        pub fn emit(ptr: *const u8, len: usize);
        #[link_name = "log"]
        pub fn log(level: i32, ptr: *const u8, len: usize);
        #[link_name = "fail"]
        pub fn fail(ptr: *const u8, len: usize);
        #[link_name = "fields"]
        pub fn fields(ptr: *const u8, len: usize);
        #[link_name = "state_declare"]
        pub fn state_declare(kind: i32, name: *const u8, name_len: usize, ttl_ms: i64) -> i32;
        #[link_name = "state_declare2"]
        pub fn state_declare2(kind: i32, name: *const u8, name_len: usize, ttl_ms: i64, schema: u32) -> i32;
        #[link_name = "state_get"]
        pub fn state_get(id: i32, key: *const u8, key_len: usize, dst: *mut u8, cap: usize) -> i32;
        #[link_name = "state_get2"]
        pub fn state_get2(id: i32, key: *const u8, key_len: usize, dst: *mut u8, cap: usize, schema: *mut u8) -> i32;
        #[link_name = "state_put"]
        pub fn state_put(id: i32, key: *const u8, key_len: usize, val: *const u8, val_len: usize);
        #[link_name = "state_clear"]
        pub fn state_clear(id: i32, key: *const u8, key_len: usize);
        #[link_name = "state_append"]
        pub fn state_append(id: i32, key: *const u8, key_len: usize, val: *const u8, val_len: usize);
        #[link_name = "state_list"]
        pub fn state_list(id: i32, key: *const u8, key_len: usize, dst: *mut u8, cap: usize) -> i32;
        #[link_name = "state_map_get"]
        pub fn state_map_get(
            id: i32, key: *const u8, key_len: usize, uk: *const u8, uk_len: usize, dst: *mut u8, cap: usize,
        ) -> i32;
        #[link_name = "state_map_put"]
        pub fn state_map_put(
            id: i32, key: *const u8, key_len: usize, uk: *const u8, uk_len: usize, val: *const u8, val_len: usize,
        );
        #[link_name = "state_map_delete"]
        pub fn state_map_delete(id: i32, key: *const u8, key_len: usize, uk: *const u8, uk_len: usize);
        #[link_name = "state_map_entries"]
        pub fn state_map_entries(id: i32, key: *const u8, key_len: usize, dst: *mut u8, cap: usize) -> i32;
        #[link_name = "timer_register"]
        pub fn timer_register(kind: i32, key: *const u8, key_len: usize, ts: i64);
        #[link_name = "timer_delete"]
        pub fn timer_delete(kind: i32, key: *const u8, key_len: usize, ts: i64);
        #[link_name = "current_watermark"]
        pub fn current_watermark() -> i64;
        #[link_name = "processing_time"]
        pub fn processing_time() -> i64;
    }
}

// Every function below passes the host pointers to live slices only; the
// host copies what it reads before returning and writes at most `cap`
// bytes into `dst`.

pub fn emit(b: &[u8]) {
    unsafe { raw::emit(b.as_ptr(), b.len()) }
}

pub fn log(level: i32, msg: &[u8]) {
    unsafe { raw::log(level, msg.as_ptr(), msg.len()) }
}

pub fn fail(msg: &[u8]) {
    unsafe { raw::fail(msg.as_ptr(), msg.len()) }
}

pub fn fields(list: &[u8]) {
    unsafe { raw::fields(list.as_ptr(), list.len()) }
}

pub fn state_declare(kind: i32, name: &[u8], ttl_ms: i64) -> i32 {
    unsafe { raw::state_declare(kind, name.as_ptr(), name.len(), ttl_ms) }
}

pub fn state_declare2(kind: i32, name: &[u8], ttl_ms: i64, schema: u32) -> i32 {
    unsafe { raw::state_declare2(kind, name.as_ptr(), name.len(), ttl_ms, schema) }
}

/// Reads into the spare capacity of dst (its length is reset), growing it
/// until the value fits. `read(dst_ptr, cap)` is one host call; the result
/// is its length, or None when absent.
fn read_grow(dst: &mut Vec<u8>, mut read: impl FnMut(*mut u8, usize) -> i32) -> Option<usize> {
    dst.clear();
    loop {
        let n = read(dst.as_mut_ptr(), dst.capacity());
        if n < 0 {
            return None;
        }
        let n = n as usize;
        if n <= dst.capacity() {
            // The host wrote n bytes into the buffer.
            unsafe { dst.set_len(n) };
            return Some(n);
        }
        dst.reserve(n);
    }
}

pub fn state_get(id: i32, key: &[u8], dst: &mut Vec<u8>) -> Option<usize> {
    read_grow(dst, |p, cap| unsafe { raw::state_get(id, key.as_ptr(), key.len(), p, cap) })
}

pub fn state_get2(id: i32, key: &[u8], dst: &mut Vec<u8>) -> Option<(usize, u32)> {
    let mut schema = [0u8; 4];
    let n = read_grow(dst, |p, cap| unsafe {
        raw::state_get2(id, key.as_ptr(), key.len(), p, cap, schema.as_mut_ptr())
    })?;
    Some((n, u32::from_le_bytes(schema)))
}

pub fn state_put(id: i32, key: &[u8], val: &[u8]) {
    unsafe { raw::state_put(id, key.as_ptr(), key.len(), val.as_ptr(), val.len()) }
}

pub fn state_clear(id: i32, key: &[u8]) {
    unsafe { raw::state_clear(id, key.as_ptr(), key.len()) }
}

pub fn state_append(id: i32, key: &[u8], val: &[u8]) {
    unsafe { raw::state_append(id, key.as_ptr(), key.len(), val.as_ptr(), val.len()) }
}

pub fn state_list(id: i32, key: &[u8], dst: &mut Vec<u8>) -> Option<usize> {
    read_grow(dst, |p, cap| unsafe { raw::state_list(id, key.as_ptr(), key.len(), p, cap) })
}

pub fn state_map_get(id: i32, key: &[u8], uk: &[u8], dst: &mut Vec<u8>) -> Option<usize> {
    read_grow(dst, |p, cap| unsafe {
        raw::state_map_get(id, key.as_ptr(), key.len(), uk.as_ptr(), uk.len(), p, cap)
    })
}

pub fn state_map_put(id: i32, key: &[u8], uk: &[u8], val: &[u8]) {
    unsafe { raw::state_map_put(id, key.as_ptr(), key.len(), uk.as_ptr(), uk.len(), val.as_ptr(), val.len()) }
}

pub fn state_map_delete(id: i32, key: &[u8], uk: &[u8]) {
    unsafe { raw::state_map_delete(id, key.as_ptr(), key.len(), uk.as_ptr(), uk.len()) }
}

pub fn state_map_entries(id: i32, key: &[u8], dst: &mut Vec<u8>) -> Option<usize> {
    read_grow(dst, |p, cap| unsafe { raw::state_map_entries(id, key.as_ptr(), key.len(), p, cap) })
}

pub fn timer_register(kind: i32, key: &[u8], ts: i64) {
    unsafe { raw::timer_register(kind, key.as_ptr(), key.len(), ts) }
}

pub fn timer_delete(kind: i32, key: &[u8], ts: i64) {
    unsafe { raw::timer_delete(kind, key.as_ptr(), key.len(), ts) }
}

pub fn current_watermark() -> i64 {
    unsafe { raw::current_watermark() }
}

pub fn processing_time() -> i64 {
    unsafe { raw::processing_time() }
}
