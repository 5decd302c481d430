//! The Eddy SDK for Rust: write an operator, a keyed operator, a
//! two-input keyed operator, an aggregate module or a window function as a
//! Rust type, and export it as a Wasm module for the Eddy host with one
//! macro.
//!
//! It implements abi/ABI.md (versions 1 to 7) and depends on nothing but
//! std, so it builds with Debian's rustc 1.63 for `wasm32-wasi` without
//! crates.io. It is not a host: it only runs inside a guest.
//!
//! | module kind | trait | macro | ABI version |
//! |---|---|---|---|
//! | operator | [`Operator`] | [`operator!`] | 1, or 7 with `fields` |
//! | keyed operator (state, timers) | [`KeyedOperator`] | [`keyed_operator!`] | 2, 4 with `schema`, 7 with `fields` |
//! | two-input keyed operator | [`KeyedCoOperator`] | [`keyed_co_operator!`] | 5, or 7 with `fields` |
//! | aggregate module | [`Aggregate`] | [`aggregate!`] | 3 |
//! | window function | [`WindowFunction`] | [`window_function!`] | 1 |
//!
//! The `fields` flag (`operator!(T, fields)`) is for an operator that
//! declares the JSON fields it reads ([`fields`], versions 6 and 7: the
//! host finds them, and parses number paths) or emits values in parts
//! ([`Emitter::emit_parts`], [`Emitter::emit_part_list`]); it declares
//! version 7, which includes every earlier addition, as linking the Go and
//! C SDKs' fields support does.
//!
//! An author writes no `unsafe`: the macro generates the exports, and every
//! pointer the host passes is checked against the buffer `eddy_alloc` gave
//! out before it becomes a slice. A panic fails the task with a one-line
//! message naming the panic (see [`rt`]).

pub mod fields;
pub mod json;
mod keyed;
#[doc(hidden)]
pub mod rt;
mod sys;

pub use keyed::{Codec, Context, Declare, ListState, MapState, Timer, TimeDomain, ValueState};
pub use fields::FieldRow;
pub use rt::{Emitter, Part};

use std::fmt;

/// The timestamp of a record that has none (-2^63).
pub const NO_TIMESTAMP: i64 = i64::MIN;

/// One record of a batch. Its slices point into the input buffer and live
/// only for the call that hands it over: copy what you keep.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Empty: no key.
    pub key: &'a [u8],
    pub value: &'a [u8],
    /// Milliseconds since the Unix epoch, or [`NO_TIMESTAMP`].
    pub timestamp: i64,
    /// The encoded headers block (ABI.md "Batch encoding"); empty for none.
    /// Read it with [`Record::headers`].
    pub headers: &'a [u8],
    /// The record's row of the field table (ABI versions 6 and 7), read
    /// with [`Record::valid`], [`Record::field`] and [`Record::number`];
    /// [`FieldRow::NONE`] for a record the operator builds.
    pub fields: FieldRow<'a>,
}

impl<'a> Record<'a> {
    /// A record without headers.
    pub fn new(key: &'a [u8], value: &'a [u8], timestamp: i64) -> Record<'a> {
        Record { key, value, timestamp, headers: &[], fields: FieldRow::NONE }
    }

    /// The headers as (key, value) pairs. The batch was checked before the
    /// call, so the block is well formed.
    pub fn headers(&self) -> Headers<'a> {
        let n = if self.headers.len() >= 4 { rt::get32(self.headers, 0) } else { 0 };
        Headers { rest: self.headers.get(4..).unwrap_or(&[]), left: n }
    }
}

/// An iterator over a record's headers.
pub struct Headers<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 || self.rest.len() < 8 {
            return None;
        }
        let kl = rt::get32(self.rest, 0) as usize;
        let vl = rt::get32(self.rest, 4) as usize;
        let k = self.rest.get(8..8 + kl)?;
        let v = self.rest.get(8 + kl..8 + kl + vl)?;
        self.rest = &self.rest[8 + kl + vl..];
        self.left -= 1;
        Some((k, v))
    }
}

/// An operator's failure: its message becomes the task's error (through
/// the `fail` import). Keep it to one line that says what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Error {
        Error(s.to_string())
    }
}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error(s)
    }
}

/// What every operator call returns.
pub type Result<T = ()> = std::result::Result<T, Error>;

/// Writes `msg` to the task log at `level` (0 debug, 1 info, 2 warn, 3
/// error). The host rate-limits it.
pub fn log(level: i32, msg: &str) {
    sys::log(level, msg.as_bytes());
}

/// A stateless operator (ABI version 1): one record in, any number out.
/// Export it with [`operator!`].
pub trait Operator: Sized {
    /// Builds the operator from its configuration, the node's `config` as
    /// JSON (`{}` when absent).
    fn open(config: &[u8]) -> Result<Self>;
    /// Handles one record; emit output through `out`.
    fn process(&mut self, record: &Record<'_>, out: &mut Emitter) -> Result;
    /// Called when the input ends or the task is cancelled.
    fn close(&mut self, _out: &mut Emitter) -> Result {
        Ok(())
    }
}

/// An operator on a keyed node (ABI version 2): keyed state, timers,
/// watermark and processing time, all through the [`Context`], which knows
/// the key of the record or timer being handled. Export it with
/// [`keyed_operator!`].
pub trait KeyedOperator: Sized {
    /// Builds the operator; states are declared here, through `states`.
    fn open(config: &[u8], states: &mut Declare) -> Result<Self>;
    fn process(&mut self, record: &Record<'_>, ctx: &mut Context) -> Result;
    /// A timer of the context's key fired.
    fn on_timer(&mut self, _timer: &Timer, _ctx: &mut Context) -> Result {
        Ok(())
    }
    fn close(&mut self, _out: &mut Emitter) -> Result {
        Ok(())
    }
}

/// The inputs of a [`KeyedCoOperator`], as `process` numbers them.
pub const LEFT: usize = 0;
/// The node's second input.
pub const RIGHT: usize = 1;

/// A two-input keyed operator (ABI version 5), Flink's
/// `KeyedCoProcessFunction`: it runs on a node with `input: [left, right]`
/// and a key per input (`key_by: [left_key, right_key]`), and `process`
/// gets each record with the input it came from ([`LEFT`] or [`RIGHT`]).
/// Keyed state and timers are those of a [`KeyedOperator`], one key space
/// for both inputs: a state declared once addresses the same values from
/// either side, and a timer fires once, whichever input set it. Export it
/// with [`keyed_co_operator!`]; its module refuses `eddy_process`.
pub trait KeyedCoOperator: Sized {
    /// Builds the operator; states are declared here, through `states`.
    fn open(config: &[u8], states: &mut Declare) -> Result<Self>;
    /// Handles one record of input `input` (0: the first, 1: the second).
    fn process(&mut self, input: usize, record: &Record<'_>, ctx: &mut Context) -> Result;
    /// A timer of the context's key fired.
    fn on_timer(&mut self, _timer: &Timer, _ctx: &mut Context) -> Result {
        Ok(())
    }
    fn close(&mut self, _out: &mut Emitter) -> Result {
        Ok(())
    }
}

/// An aggregate module (ABI version 3), Flink's `AggregateFunction`: the
/// window operator keeps the accumulators, byte strings this type defines.
/// Each method writes its answer to `out`, which starts empty. Export it
/// with [`aggregate!`].
pub trait Aggregate: Sized {
    fn open(config: &[u8]) -> Result<Self>;
    /// An empty accumulator; it must depend only on the configuration.
    fn create(&mut self, out: &mut Vec<u8>) -> Result;
    /// `acc` with `record` added.
    fn add(&mut self, acc: &[u8], record: &Record<'_>, out: &mut Vec<u8>) -> Result;
    /// The merge of two accumulators: associative, commutative, and the
    /// empty accumulator changes nothing.
    fn merge(&mut self, a: &[u8], b: &[u8], out: &mut Vec<u8>) -> Result;
    /// The window's result as one JSON value.
    fn result(&mut self, acc: &[u8], out: &mut Vec<u8>) -> Result;
    fn close(&mut self) -> Result {
        Ok(())
    }
}

/// The window a window function is handed.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    pub key: &'a [u8],
    /// Milliseconds; `end` is exclusive.
    pub start: i64,
    pub end: i64,
}

/// A window function, Flink's `ProcessWindowFunction`: when a window
/// fires, the whole window's elements in event-time order. The host sets
/// the timestamp of what it emits to the window's end - 1. Export it with
/// [`window_function!`].
pub trait WindowFunction: Sized {
    fn open(config: &[u8]) -> Result<Self>;
    fn apply(&mut self, window: &Window<'_>, elements: &[Record<'_>], out: &mut Emitter) -> Result;
    fn close(&mut self, _out: &mut Emitter) -> Result {
        Ok(())
    }
}

/// Appends the decimal form of `v`, without std formatting (which costs
/// code size and time on the hot path).
pub fn append_u64(dst: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    dst.extend_from_slice(&buf[i..]);
}

/// Appends the decimal form of `v`, as [`append_u64`].
pub fn append_i64(dst: &mut Vec<u8>, v: i64) {
    if v < 0 {
        dst.push(b'-');
    }
    append_u64(dst, v.unsigned_abs());
}

/// Exports `$t`, an [`Operator`], as the module's operator (ABI version
/// 1; `operator!(T, fields)` declares version 7, for an operator that
/// uses [`fields`] or [`Emitter::emit_parts`]).
#[macro_export]
macro_rules! operator {
    ($t:ty) => {
        $crate::__operator_exports!($t, 1);
    };
    ($t:ty, fields) => {
        $crate::__operator_exports!($t, 7);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __operator_exports {
    ($t:ty, $v:expr) => {
        $crate::__common_exports!($v);
        #[no_mangle]
        pub extern "C" fn eddy_open(ptr: i32, len: i32) -> i32 {
            $crate::rt::open_operator::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_process(ptr: i32, len: i32) -> i32 {
            $crate::rt::process_operator::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_close() -> i32 {
            $crate::rt::close_operator::<$t>()
        }
    };
}

/// Exports `$t`, a [`KeyedOperator`] (ABI version 2; `keyed_operator!(T,
/// schema)` declares version 4, for an operator that declares states with
/// [`Declare::value_with_schema`]; `keyed_operator!(T, fields)` declares
/// version 7, which includes 4, for one that uses [`fields`] too).
#[macro_export]
macro_rules! keyed_operator {
    ($t:ty) => {
        $crate::__keyed_exports!($t, 2);
    };
    ($t:ty, schema) => {
        $crate::__keyed_exports!($t, 4);
    };
    ($t:ty, fields) => {
        $crate::__keyed_exports!($t, 7);
    };
}

/// Exports `$t`, a [`KeyedCoOperator`], as a two-input operator: ABI
/// version 5 (which includes the schema versions of 4), or 7 with
/// `keyed_co_operator!(T, fields)`, for one that uses [`fields`]. It
/// exports `eddy_process2`; its `eddy_process` fails, saying the module
/// is a two-input operator.
#[macro_export]
macro_rules! keyed_co_operator {
    ($t:ty) => {
        $crate::__keyed_co_exports!($t, 5);
    };
    ($t:ty, fields) => {
        $crate::__keyed_co_exports!($t, 7);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __keyed_co_exports {
    ($t:ty, $v:expr) => {
        $crate::__common_exports!($v);
        #[no_mangle]
        pub extern "C" fn eddy_open(ptr: i32, len: i32) -> i32 {
            $crate::rt::open_co::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_process(_ptr: i32, _len: i32) -> i32 {
            $crate::rt::process_co_one_input()
        }
        #[no_mangle]
        pub extern "C" fn eddy_process2(input: i32, ptr: i32, len: i32) -> i32 {
            $crate::rt::process_co::<$t>(input, ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_on_timer(ptr: i32, len: i32) -> i32 {
            $crate::rt::timer_co::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_close() -> i32 {
            $crate::rt::close_co::<$t>()
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __keyed_exports {
    ($t:ty, $v:expr) => {
        $crate::__common_exports!($v);
        #[no_mangle]
        pub extern "C" fn eddy_open(ptr: i32, len: i32) -> i32 {
            $crate::rt::open_keyed::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_process(ptr: i32, len: i32) -> i32 {
            $crate::rt::process_keyed::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_on_timer(ptr: i32, len: i32) -> i32 {
            $crate::rt::timer_keyed::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_close() -> i32 {
            $crate::rt::close_keyed::<$t>()
        }
    };
}

/// Exports `$t`, an [`Aggregate`], as an aggregate module (ABI version 3).
#[macro_export]
macro_rules! aggregate {
    ($t:ty) => {
        $crate::__common_exports!(3);
        #[no_mangle]
        pub extern "C" fn eddy_open(ptr: i32, len: i32) -> i32 {
            $crate::rt::open_aggregate::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_process(_ptr: i32, _len: i32) -> i32 {
            $crate::rt::process_aggregate()
        }
        #[no_mangle]
        pub extern "C" fn eddy_agg_create() -> i32 {
            $crate::rt::agg_create::<$t>()
        }
        #[no_mangle]
        pub extern "C" fn eddy_agg_add(ptr: i32, len: i32) -> i32 {
            $crate::rt::agg_fold::<$t>(ptr, len, false)
        }
        #[no_mangle]
        pub extern "C" fn eddy_agg_merge(ptr: i32, len: i32) -> i32 {
            $crate::rt::agg_fold::<$t>(ptr, len, true)
        }
        #[no_mangle]
        pub extern "C" fn eddy_agg_result(ptr: i32, len: i32) -> i32 {
            $crate::rt::agg_result::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_close() -> i32 {
            $crate::rt::close_aggregate::<$t>()
        }
    };
}

/// Exports `$t`, a [`WindowFunction`] (an ordinary operator, version 1).
#[macro_export]
macro_rules! window_function {
    ($t:ty) => {
        $crate::__common_exports!(1);
        #[no_mangle]
        pub extern "C" fn eddy_open(ptr: i32, len: i32) -> i32 {
            $crate::rt::open_window::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_process(ptr: i32, len: i32) -> i32 {
            $crate::rt::process_window::<$t>(ptr, len)
        }
        #[no_mangle]
        pub extern "C" fn eddy_close() -> i32 {
            $crate::rt::close_window::<$t>()
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __common_exports {
    ($v:expr) => {
        #[no_mangle]
        pub extern "C" fn eddy_abi_version() -> i32 {
            $crate::rt::set_version($v);
            $v
        }
        #[no_mangle]
        pub extern "C" fn eddy_alloc(size: i32) -> i32 {
            $crate::rt::set_version($v);
            $crate::rt::alloc(size)
        }
    };
}
