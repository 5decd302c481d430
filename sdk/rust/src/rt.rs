//! The runtime behind the export macros: the `eddy_alloc` buffer, batch
//! decoding, the output batch, failures and the panic hook. Not for
//! authors; the macros call it.
//!
//! The host drives an instance from one thread and never calls back into
//! the guest during an import, so the globals below are never accessed
//! concurrently or reentrantly: each is borrowed for the length of one
//! statement or one helper, never across a call into the operator, except
//! the operator itself (OP), which nothing else touches.

use crate::keyed::{set_key, Context, Declare, TimeDomain, Timer};
use crate::{
    fields, sys, Aggregate, Error, FieldRow, KeyedCoOperator, KeyedOperator, Operator, Record, Window, WindowFunction,
    NO_TIMESTAMP,
};
use std::any::Any;

const BATCH_MAGIC: u32 = 0x3142_4445; // "EDB1"
const HEADER_SIZE: usize = 8;
const ENTRY_SIZE: usize = 32;
const MAX_RECORDS: u32 = 1 << 24;
const MAX_HEADERS: u32 = 1 << 16;
/// The output batch's size, as the C SDK's: large enough that a batch of
/// small records is one `emit`.
pub const OUTPUT_BUFFER_SIZE: usize = 64 * 1024;
/// The version that brings fields (6) with number paths and values in
/// parts (7): what the `fields` flag of the macros declares.
pub const PARTS_VERSION: i32 = 7;
const MIN_INPUT: usize = 64 * 1024;
const GROUP_HEADER_KEY_LEN: usize = 4;
const WINDOW_DESCRIPTOR_LEN: usize = 16;
/// Bit 31 of an output entry's value_len: the value is a part list.
const PART_LIST: u32 = 1 << 31;

struct Output {
    buf: Vec<u8>,
    count: usize,
    data: usize, // start of the data, growing down
}

static mut INPUT: Vec<u8> = Vec::new();
static mut OUTPUT: Output = Output { buf: Vec::new(), count: 0, data: OUTPUT_BUFFER_SIZE };
static mut OP: Option<Box<dyn Any>> = None;
static mut FAILED: bool = false;
static mut HOOKED: bool = false;
static mut OPENING: bool = false;
static mut VERSION: i32 = 1;

/// The ABI version the module declares (the macros set it before
/// `eddy_open`): what [`fields`] and [`Emitter::emit_parts`] check.
pub fn set_version(v: i32) {
    unsafe { VERSION = v };
}

pub(crate) fn version() -> i32 {
    unsafe { VERSION }
}

/// True while the operator's `open` runs, the only time the host takes a
/// field list.
pub(crate) fn opening() -> bool {
    unsafe { OPENING }
}

pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn get64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_le_bytes(x)
}

/// Hands `msg` to the host as the current call's error.
pub(crate) fn fail(msg: &str) {
    unsafe { FAILED = true };
    sys::fail(msg.as_bytes());
}

/// The `eddy_alloc` export: one growing buffer.
pub fn alloc(size: i32) -> i32 {
    let size = size as u32 as usize;
    let input = unsafe { &mut INPUT };
    if input.capacity() > 0 && size <= input.capacity() {
        return input.as_ptr() as i32;
    }
    // Grow geometrically so that a slowly growing batch size does not
    // reallocate every batch; drop rather than grow in place, since the
    // ABI lets each call invalidate the previous buffer's contents.
    let cap = size.max(MIN_INPUT).max(2 * input.capacity());
    *input = Vec::new();
    let mut v = Vec::new();
    if v.try_reserve_exact(cap).is_err() && v.try_reserve_exact(size.max(1)).is_err() {
        return 0; // the ABI's "cannot"
    }
    *input = v;
    input.as_ptr() as i32
}

/// The host's range [ptr, ptr+len) as a slice of the eddy_alloc buffer, or
/// a failure naming it: the host must pass a range it wrote there.
fn input_slice(what: &str, ptr: i32, len: i32) -> Result<&'static [u8], Error> {
    let input = unsafe { &INPUT };
    let (base, p, n) = (input.as_ptr() as usize, ptr as u32 as usize, len as u32 as usize);
    if input.capacity() == 0 || p < base || (p - base) as u64 + n as u64 > input.capacity() as u64 {
        return Err(Error::new(format!(
            "eddy: {} [{}, {}) is not inside the buffer returned by eddy_alloc",
            what,
            p,
            p as u64 + n as u64
        )));
    }
    // The range lies inside the buffer's allocation, which the host wrote
    // (bytes) and which lives until the next eddy_alloc, after this call.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, n) })
}

fn install_panic_hook() {
    unsafe {
        if HOOKED {
            return;
        }
        HOOKED = true;
    }
    // A panic aborts (wasm32 has no unwinding), which traps; the hook first
    // gives the host the panic's message, so the task's error says what
    // happened rather than "unreachable".
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = if let Some(s) = payload.downcast_ref::<&str>() {
            s
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.as_str()
        } else {
            "Box<dyn Any>"
        };
        let mut line = String::with_capacity(msg.len() + 64);
        line.push_str("panic: ");
        line.push_str(msg);
        if let Some(l) = info.location() {
            line.push_str(" (at ");
            line.push_str(l.file());
            line.push(':');
            let mut n = Vec::new();
            crate::append_u64(&mut n, l.line() as u64);
            line.push_str(std::str::from_utf8(&n).unwrap_or(""));
            line.push(')');
        }
        let line = line.replace('\n', " ");
        fail(&line);
    }));
}

/// Ends a failed call: output not yet handed over is dropped (the task
/// fails), and the message is given unless the operator gave one.
fn failed(err: Error) -> i32 {
    let out = unsafe { &mut OUTPUT };
    out.count = 0;
    out.data = OUTPUT_BUFFER_SIZE;
    fail(err.message());
    1
}

fn status(r: Result<(), Error>) -> i32 {
    match r {
        Ok(()) => {
            flush();
            0
        }
        Err(e) => failed(e),
    }
}

fn op<T: 'static>() -> Result<&'static mut T, Error> {
    match unsafe { OP.as_mut() }.and_then(|b| b.downcast_mut::<T>()) {
        Some(t) => Ok(t),
        None => Err(Error::new("eddy: called before eddy_open succeeded")),
    }
}

fn open_with<T: 'static>(ptr: i32, len: i32, build: impl FnOnce(&[u8]) -> Result<T, Error>) -> i32 {
    install_panic_hook();
    unsafe { FAILED = false };
    unsafe { OPENING = true };
    let r = input_slice("config", ptr, len).and_then(build);
    unsafe { OPENING = false };
    match r {
        Ok(t) => {
            unsafe { OP = Some(Box::new(t)) };
            0
        }
        Err(e) => failed(e),
    }
}

// --- the output batch ---

fn out_buf() -> &'static mut Output {
    let out = unsafe { &mut OUTPUT };
    if out.buf.is_empty() {
        out.buf = vec![0u8; OUTPUT_BUFFER_SIZE];
    }
    out
}

/// What an output entry's value is: bytes, or (version 7) a list of
/// parts the host gathers.
#[derive(Clone, Copy)]
enum Value<'a> {
    Bytes(&'a [u8]),
    Parts(&'a [&'a [u8]]),
    PartList(&'a [Part]),
}

fn put_record(buf: &mut [u8], count: &mut usize, data: &mut usize, r: &Record<'_>, value: Value<'_>) {
    let e = HEADER_SIZE + ENTRY_SIZE * *count;
    buf[e..e + 8].copy_from_slice(&r.timestamp.to_le_bytes());
    fn place(b: &[u8], at: usize, buf: &mut [u8], data: &mut usize) {
        *data -= b.len();
        buf[*data..*data + b.len()].copy_from_slice(b);
        buf[at..at + 4].copy_from_slice(&(*data as u32).to_le_bytes());
        buf[at + 4..at + 8].copy_from_slice(&(b.len() as u32).to_le_bytes());
    }
    if r.headers.is_empty() {
        buf[e + 24..e + 32].fill(0);
    } else {
        place(r.headers, e + 24, buf, data);
    }
    match value {
        Value::Bytes(v) => place(v, e + 16, buf, data),
        Value::Parts(parts) => {
            // Each part is its address in this module's memory (wasm32:
            // a usize is a u32) and its length.
            *data -= 8 * parts.len();
            for (k, p) in parts.iter().enumerate() {
                let at = *data + 8 * k;
                buf[at..at + 4].copy_from_slice(&(p.as_ptr() as usize as u32).to_le_bytes());
                buf[at + 4..at + 8].copy_from_slice(&(p.len() as u32).to_le_bytes());
            }
            buf[e + 16..e + 20].copy_from_slice(&(*data as u32).to_le_bytes());
            buf[e + 20..e + 24].copy_from_slice(&(PART_LIST | parts.len() as u32).to_le_bytes());
        }
        Value::PartList(parts) => {
            *data -= 8 * parts.len();
            for (k, p) in parts.iter().enumerate() {
                let at = *data + 8 * k;
                buf[at..at + 4].copy_from_slice(&p.addr.to_le_bytes());
                buf[at + 4..at + 8].copy_from_slice(&p.len.to_le_bytes());
            }
            buf[e + 16..e + 20].copy_from_slice(&(*data as u32).to_le_bytes());
            buf[e + 20..e + 24].copy_from_slice(&(PART_LIST | parts.len() as u32).to_le_bytes());
        }
    }
    place(r.key, e + 8, buf, data);
    *count += 1;
}

fn finish(buf: &mut [u8], count: usize) {
    buf[0..4].copy_from_slice(&BATCH_MAGIC.to_le_bytes());
    buf[4..8].copy_from_slice(&(count as u32).to_le_bytes());
}

fn flush() {
    let out = unsafe { &mut OUTPUT };
    if out.count == 0 {
        return;
    }
    finish(&mut out.buf, out.count);
    sys::emit(&out.buf);
    out.count = 0;
    out.data = OUTPUT_BUFFER_SIZE;
}

/// Hands records to the host, batched: one `emit` per 64 KiB of output.
/// An operator gets one for the length of a call and cannot keep it.
pub struct Emitter {
    _private: (),
}

static mut EMITTER: Emitter = Emitter { _private: () };

pub(crate) fn emitter() -> &'static mut Emitter {
    unsafe { &mut EMITTER }
}

impl Emitter {
    /// Emits a copy of `r` (the host copies it too: the slices may be
    /// reused at once).
    pub fn emit(&mut self, r: &Record<'_>) -> Result<(), Error> {
        let size = ENTRY_SIZE + r.key.len() + r.value.len() + r.headers.len();
        let fits = |o: &Output| HEADER_SIZE + ENTRY_SIZE * o.count + size <= o.data;
        let out = out_buf();
        if !fits(out) {
            flush();
        }
        let out = out_buf();
        if fits(out) {
            put_record(&mut out.buf, &mut out.count, &mut out.data, r, Value::Bytes(r.value));
            return Ok(());
        }
        // Larger than the whole output buffer: hand it over alone, after
        // the records before it, so that order is kept.
        let total = HEADER_SIZE + size;
        if total > u32::MAX as usize {
            return Err(Error::new("eddy: a record larger than 4 GiB"));
        }
        let mut spill = vec![0u8; total];
        let (mut count, mut data) = (0, total);
        put_record(&mut spill, &mut count, &mut data, r, Value::Bytes(r.value));
        finish(&mut spill, 1);
        sys::emit(&spill);
        Ok(())
    }

    /// Emits a record like `r` (its value is not used) whose value is the
    /// concatenation of `parts`, without copying them: the host gathers
    /// them when it takes the output (ABI version 7, values in parts; the
    /// module is exported with the `fields` flag). The list is copied, so
    /// `parts` may be reused at once, but each part's bytes must stay
    /// unchanged until the current call (`process`, `on_timer`, `close`)
    /// returns: the record's own bytes (its spans, [`Record::field`]) and
    /// memory the operator keeps (its configuration) do; a buffer that
    /// `process` overwrites or drops does not.
    pub fn emit_parts(&mut self, r: &Record<'_>, parts: &[&[u8]]) -> Result<(), Error> {
        emit_list(r, parts.len(), Value::Parts(parts))
    }

    /// [`emit_parts`](Emitter::emit_parts) with [`Part`]s: the pieces
    /// `parts` names, which must stay unchanged until the current call
    /// returns, as for `emit_parts`. A list of Parts holds no borrow, so an
    /// operator can keep it (and its constant pieces, made once in `open`)
    /// from record to record without allocating.
    pub fn emit_part_list(&mut self, r: &Record<'_>, parts: &[Part]) -> Result<(), Error> {
        emit_list(r, parts.len(), Value::PartList(parts))
    }

    /// Emits a record without headers.
    pub fn emit_kv(&mut self, key: &[u8], value: &[u8], timestamp: i64) -> Result<(), Error> {
        self.emit(&Record::new(key, value, timestamp))
    }
}

fn emit_list(r: &Record<'_>, n: usize, value: Value<'_>) -> Result<(), Error> {
    if version() < PARTS_VERSION {
        return Err(Error::new(format!(
            "eddy: emit_parts needs ABI version 7, and the module declares {}: export it with the fields flag, as eddy::operator!(T, fields)",
            version()
        )));
    }
    let size = ENTRY_SIZE as u64 + r.key.len() as u64 + 8 * n as u64 + r.headers.len() as u64;
    if size > (OUTPUT_BUFFER_SIZE - HEADER_SIZE) as u64 {
        return Err(Error::new(format!(
            "eddy: emit_parts: a list of {} parts does not fit in the {}-byte output buffer",
            n, OUTPUT_BUFFER_SIZE
        )));
    }
    let size = size as usize;
    let fits = |o: &Output| HEADER_SIZE + ENTRY_SIZE * o.count + size <= o.data;
    if !fits(out_buf()) {
        flush();
    }
    let out = out_buf();
    put_record(&mut out.buf, &mut out.count, &mut out.data, r, value);
    Ok(())
}

/// One piece of a value emitted with
/// [`Emitter::emit_part_list`]: the piece's address in the module's
/// memory and its length, which is what the ABI's part list holds (ABI
/// version 7). It names the bytes, not a copy, and holds no borrow: the
/// bytes must stay unchanged until the emitting call returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Part {
    addr: u32,
    len: u32,
}

impl Part {
    /// The empty piece.
    pub const EMPTY: Part = Part { addr: 0, len: 0 };

    /// `b` as a Part (wasm32: its address is a u32).
    pub fn of(b: &[u8]) -> Part {
        Part { addr: b.as_ptr() as usize as u32, len: b.len() as u32 }
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// --- batches ---

fn headers_ok(b: &[u8]) -> bool {
    if b.len() < 4 {
        return false;
    }
    let n = get32(b, 0);
    if n > MAX_HEADERS || n as u64 * 8 > (b.len() - 4) as u64 {
        return false;
    }
    let mut at = 4u64;
    for _ in 0..n {
        if at + 8 > b.len() as u64 {
            return false;
        }
        let (kl, vl) = (get32(b, at as usize) as u64, get32(b, at as usize + 4) as u64);
        at += 8;
        if at + kl + vl > b.len() as u64 {
            return false;
        }
        at += kl + vl;
    }
    true
}

/// A checked batch: every record's ranges lie inside it, and so does its
/// field table when it has one (`row` > 0, the size of a row).
struct Batch {
    b: &'static [u8],
    count: usize,
    row: usize,
}

impl Batch {
    fn record(&self, i: usize) -> Record<'static> {
        let b = self.b;
        let e = HEADER_SIZE + ENTRY_SIZE * i;
        let span = |at: usize| {
            let (o, l) = (get32(b, at) as usize, get32(b, at + 4) as usize);
            &b[o..o + l]
        };
        let hl = get32(b, e + 28);
        let fields = if self.row == 0 {
            FieldRow::NONE
        } else {
            let at = HEADER_SIZE + ENTRY_SIZE * self.count + self.row * i;
            FieldRow { batch: b, row: &b[at..at + self.row] }
        };
        Record {
            timestamp: get64(b, e),
            key: span(e + 8),
            value: span(e + 16),
            headers: if hl == 0 { &[] } else { span(e + 24) },
            fields,
        }
    }
}

/// Checks a batch as abi.DecodeBatch does, every record before the first is
/// handled, so that a bad batch fails without partial output. Batches of
/// eddy_process and eddy_process2 (`table`) carry a field table once the
/// instance declared fields.
fn batch_of(range: &str, what: &str, ptr: i32, len: i32, table: bool) -> Result<Batch, Error> {
    let b = input_slice(range, ptr, len)?;
    let n = b.len();
    if n < HEADER_SIZE {
        return Err(Error::new(format!("eddy: {}: malformed: {} bytes is shorter than the header", what, n)));
    }
    if get32(b, 0) != BATCH_MAGIC {
        return Err(Error::new(format!("eddy: {}: malformed: bad magic {:#08x}", what, get32(b, 0))));
    }
    let count = get32(b, 4);
    if count > MAX_RECORDS || HEADER_SIZE as u64 + count as u64 * ENTRY_SIZE as u64 > n as u64 {
        return Err(Error::new(format!("eddy: {}: malformed: {} records do not fit in {} bytes", what, count, n)));
    }
    let row = if table { fields::row_size() } else { 0 };
    if HEADER_SIZE as u64 + count as u64 * (ENTRY_SIZE + row) as u64 > n as u64 {
        return Err(Error::new(format!(
            "eddy: {}: malformed: {} records and their field table do not fit in {} bytes",
            what, count, n
        )));
    }
    for i in 0..count as usize {
        let e = HEADER_SIZE + ENTRY_SIZE * i;
        let g = |at| get32(b, e + at) as u64;
        let (ko, kl, vo, vl, ho, hl) = (g(8), g(12), g(16), g(20), g(24), g(28));
        let n = n as u64;
        if ko + kl > n || vo + vl > n || (hl != 0 && (ho + hl > n || !headers_ok(&b[ho as usize..(ho + hl) as usize]))) {
            return Err(Error::new(format!(
                "eddy: {}: malformed: record {} has a range outside the {}-byte batch or bad headers",
                what, i, n
            )));
        }
    }
    Ok(Batch { b, count: count as usize, row })
}

fn batch(range: &str, what: &str, ptr: i32, len: i32) -> Result<Batch, Error> {
    batch_of(range, what, ptr, len, false)
}

/// An input batch of eddy_process or eddy_process2.
fn input_batch(ptr: i32, len: i32) -> Result<Batch, Error> {
    batch_of("batch", "input batch", ptr, len, true)
}

fn begin() {
    unsafe { FAILED = false };
}

// --- operators ---

pub fn open_operator<T: Operator + 'static>(ptr: i32, len: i32) -> i32 {
    open_with(ptr, len, T::open)
}

pub fn process_operator<T: Operator + 'static>(ptr: i32, len: i32) -> i32 {
    begin();
    status((|| {
        let b = input_batch(ptr, len)?;
        let t = op::<T>()?;
        let out = emitter();
        for i in 0..b.count {
            t.process(&b.record(i), out)?;
        }
        Ok(())
    })())
}

pub fn close_operator<T: Operator + 'static>() -> i32 {
    begin();
    status(op::<T>().and_then(|t| t.close(emitter())))
}

// --- keyed operators ---

pub fn open_keyed<T: KeyedOperator + 'static>(ptr: i32, len: i32) -> i32 {
    open_with(ptr, len, |cfg| T::open(cfg, &mut Declare::new()))
}

pub fn process_keyed<T: KeyedOperator + 'static>(ptr: i32, len: i32) -> i32 {
    begin();
    let r = (|| {
        let b = input_batch(ptr, len)?;
        let t = op::<T>()?;
        let ctx = Context::get();
        for i in 0..b.count {
            let r = b.record(i);
            set_key(r.key);
            t.process(&r, ctx)?;
        }
        Ok(())
    })();
    set_key(&[]);
    status(r)
}

pub fn timer_keyed<T: KeyedOperator + 'static>(ptr: i32, len: i32) -> i32 {
    run_timers(ptr, len, |timer, ctx| op::<T>()?.on_timer(timer, ctx))
}

fn run_timers(ptr: i32, len: i32, mut each: impl FnMut(&Timer, &mut Context) -> Result<(), Error>) -> i32 {
    begin();
    let r = (|| {
        let b = batch("timer batch", "timer batch", ptr, len)?;
        let ctx = Context::get();
        for i in 0..b.count {
            let r = b.record(i);
            let domain = match r.value {
                [0] => TimeDomain::EventTime,
                [1] => TimeDomain::ProcessingTime,
                _ => {
                    return Err(Error::new(format!(
                        "eddy: timer batch: a timer's value has {} bytes (first {}), want one byte: 0 (event time) or 1 (processing time)",
                        r.value.len(),
                        r.value.first().map_or(-1, |&b| b as i32)
                    )))
                }
            };
            set_key(r.key);
            each(&Timer { domain, timestamp: r.timestamp }, ctx)?;
        }
        Ok(())
    })();
    set_key(&[]);
    status(r)
}

pub fn close_keyed<T: KeyedOperator + 'static>() -> i32 {
    begin();
    status(op::<T>().and_then(|t| t.close(emitter())))
}

// --- two-input keyed operators ---

pub fn open_co<T: KeyedCoOperator + 'static>(ptr: i32, len: i32) -> i32 {
    open_with(ptr, len, |cfg| T::open(cfg, &mut Declare::new()))
}

/// The host never calls eddy_process on a module that exports
/// eddy_process2, so a call means a host that does not know two-input
/// operators: say so, as the Go and C SDKs do.
pub fn process_co_one_input() -> i32 {
    begin();
    failed(Error::new("eddy: this module is a two-input operator (it is exported with eddy::keyed_co_operator!): it takes records through eddy_process2, not eddy_process"))
}

pub fn process_co<T: KeyedCoOperator + 'static>(input: i32, ptr: i32, len: i32) -> i32 {
    begin();
    let r = (|| {
        let b = input_batch(ptr, len)?;
        let input = match input {
            0 | 1 => input as usize,
            _ => return Err(Error::new("eddy: eddy_process2 called for an input other than 0 and 1")),
        };
        let t = op::<T>()?;
        let ctx = Context::get();
        for i in 0..b.count {
            let r = b.record(i);
            set_key(r.key);
            t.process(input, &r, ctx)?;
        }
        Ok(())
    })();
    set_key(&[]);
    status(r)
}

pub fn timer_co<T: KeyedCoOperator + 'static>(ptr: i32, len: i32) -> i32 {
    run_timers(ptr, len, |timer, ctx| op::<T>()?.on_timer(timer, ctx))
}

pub fn close_co<T: KeyedCoOperator + 'static>() -> i32 {
    begin();
    status(op::<T>().and_then(|t| t.close(emitter())))
}

// --- aggregates ---

static mut FOLDS: [Vec<u8>; 2] = [Vec::new(), Vec::new()];

fn emit_value(v: &[u8]) -> Result<(), Error> {
    emitter().emit_kv(&[], v, NO_TIMESTAMP)
}

pub fn open_aggregate<T: Aggregate + 'static>(ptr: i32, len: i32) -> i32 {
    open_with(ptr, len, T::open)
}

/// An aggregate module is not an operator: say so rather than leave the
/// host to report a missing export, as the Go and C SDKs do.
pub fn process_aggregate() -> i32 {
    begin();
    failed(Error::new("aggregate: this module is an aggregate module (it is exported with eddy::aggregate!), not an operator: use it as a window node's aggregate, which calls eddy_agg_add, not eddy_process"))
}

pub fn agg_create<T: Aggregate + 'static>() -> i32 {
    begin();
    status((|| {
        let t = op::<T>()?;
        let acc = unsafe { &mut FOLDS[0] };
        acc.clear();
        t.create(acc)?;
        emit_value(acc)
    })())
}

/// `eddy_agg_add` and `eddy_agg_merge`: each group (ABI.md "Aggregate
/// modules") folds into one of two buffers in turn, the previous
/// accumulator being read from the other one.
pub fn agg_fold<T: Aggregate + 'static>(ptr: i32, len: i32, merging: bool) -> i32 {
    begin();
    let name = if merging { "eddy_agg_merge" } else { "eddy_agg_add" };
    status((|| {
        let range = if merging { "eddy_agg_merge batch" } else { "eddy_agg_add batch" };
        let b = batch(range, range, ptr, len)?;
        let t = op::<T>()?;
        let folds = unsafe { &mut FOLDS };
        let mut i = 0;
        while i < b.count {
            let h = b.record(i);
            if h.key.len() != GROUP_HEADER_KEY_LEN {
                return Err(Error::new(format!(
                    "aggregate: {}: record {} should be a group header, with a {}-byte key, but its key has {} bytes",
                    name,
                    i,
                    GROUP_HEADER_KEY_LEN,
                    h.key.len()
                )));
            }
            let n = get32(h.key, 0) as usize;
            if n > b.count - i - 1 {
                return Err(Error::new(format!(
                    "aggregate: {}: the group header at record {} announces {} records, but only {} follow",
                    name,
                    i,
                    n,
                    b.count - i - 1
                )));
            }
            // cur: which buffer holds the accumulator; None: the header.
            let mut cur: Option<usize> = None;
            for m in 1..=n {
                let r = b.record(i + m);
                let w = cur.map_or(0, |c| c ^ 1);
                let (a, b2) = folds.split_at_mut(1);
                let (dst, src) = if w == 0 { (&mut a[0], &b2[0]) } else { (&mut b2[0], &a[0]) };
                let acc: &[u8] = if cur.is_some() { src } else { h.value };
                dst.clear();
                if merging {
                    t.merge(acc, r.value, dst)?;
                } else {
                    t.add(acc, &r, dst)?;
                }
                cur = Some(w);
            }
            match cur {
                Some(c) => emit_value(&folds[c])?,
                None => emit_value(h.value)?,
            }
            i += n + 1;
        }
        Ok(())
    })())
}

pub fn agg_result<T: Aggregate + 'static>(ptr: i32, len: i32) -> i32 {
    begin();
    status((|| {
        let b = batch("eddy_agg_result batch", "eddy_agg_result batch", ptr, len)?;
        let t = op::<T>()?;
        let out = unsafe { &mut FOLDS[0] };
        for i in 0..b.count {
            out.clear();
            t.result(b.record(i).value, out)?;
            emit_value(out)?;
        }
        Ok(())
    })())
}

pub fn close_aggregate<T: Aggregate + 'static>() -> i32 {
    begin();
    status(op::<T>().and_then(|t| t.close()))
}

// --- window functions ---

pub fn open_window<T: WindowFunction + 'static>(ptr: i32, len: i32) -> i32 {
    open_with(ptr, len, T::open)
}

pub fn process_window<T: WindowFunction + 'static>(ptr: i32, len: i32) -> i32 {
    begin();
    status((|| {
        let b = batch("batch", "input batch", ptr, len)?;
        if b.count == 0 {
            return Err(Error::new("window: an empty batch: a window function's batch starts with the window's descriptor; is the module used as a window node's apply?"));
        }
        let d = b.record(0);
        if d.value.len() != WINDOW_DESCRIPTOR_LEN {
            return Err(Error::new(format!(
                "window: record 0 is not a window descriptor: its value has {} bytes, want {}; is the module used as a window node's apply?",
                d.value.len(),
                WINDOW_DESCRIPTOR_LEN
            )));
        }
        let w = Window { key: d.key, start: get64(d.value, 0), end: get64(d.value, 8) };
        let elems: Vec<Record<'_>> = (1..b.count).map(|i| b.record(i)).collect();
        op::<T>()?.apply(&w, &elems, emitter())
    })())
}

pub fn close_window<T: WindowFunction + 'static>() -> i32 {
    begin();
    status(op::<T>().and_then(|t| t.close(emitter())))
}
