//! Keyed state, timers and time (ABI versions 2 and 4), for a
//! [`KeyedOperator`](crate::KeyedOperator). Every state and timer call
//! takes the [`Context`], which the SDK hands over only while a record or
//! timer of a key is being handled: that is what lets the SDK pass the key
//! for the author, and what makes "state outside a keyed call" a compile
//! error rather than a host trap.

use crate::rt::{emitter, Emitter};
use crate::{sys, Error, Result};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

static mut KEY: &[u8] = &[];
static mut SCRATCH: Vec<u8> = Vec::new();
static mut ENCODED: Vec<u8> = Vec::new();
static mut ENCODED_KEY: Vec<u8> = Vec::new();

pub(crate) fn set_key(k: &'static [u8]) {
    unsafe { KEY = k };
}

fn key() -> &'static [u8] {
    unsafe { KEY }
}

fn scratch() -> &'static mut Vec<u8> {
    unsafe { &mut SCRATCH }
}

// Encodes v into a reused buffer: state writes allocate nothing.
fn encoded<T: Codec>(v: &T) -> &'static [u8] {
    let b = unsafe { &mut ENCODED };
    b.clear();
    v.encode(b);
    b
}

fn encoded_key<T: Codec>(v: &T) -> &'static [u8] {
    let b = unsafe { &mut ENCODED_KEY };
    b.clear();
    v.encode(b);
    b
}

/// How a state's values are stored as bytes. The encoding is part of the
/// job's checkpoints: change it only with a schema version (see
/// [`Declare::value_with_schema`]).
pub trait Codec: Sized {
    fn encode(&self, out: &mut Vec<u8>);
    /// The value stored as `b`; an error fails the call with its message.
    fn decode(b: &[u8]) -> Result<Self>;
}

impl Codec for Vec<u8> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self)
    }
    fn decode(b: &[u8]) -> Result<Self> {
        Ok(b.to_vec())
    }
}

impl Codec for String {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes())
    }
    fn decode(b: &[u8]) -> Result<Self> {
        String::from_utf8(b.to_vec()).map_err(|_| Error::new("eddy: a stored string is not valid UTF-8"))
    }
}

macro_rules! le_codec {
    ($($t:ty),*) => {$(
        /// Little endian, fixed width.
        impl Codec for $t {
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes())
            }
            fn decode(b: &[u8]) -> Result<Self> {
                let mut x = [0u8; std::mem::size_of::<$t>()];
                if b.len() != x.len() {
                    return Err(Error::new(format!(
                        "eddy: a stored {} has {} bytes, want {}", stringify!($t), b.len(), x.len())));
                }
                x.copy_from_slice(b);
                Ok(<$t>::from_le_bytes(x))
            }
        }
    )*};
}

le_codec!(u32, i32, u64, i64, f64);

/// Declares states during `open` (ABI.md: `state_declare` is valid only
/// then). Declaring a name again with the same kind returns the same state.
pub struct Declare {
    _private: (),
}

impl Declare {
    pub(crate) fn new() -> Declare {
        Declare { _private: () }
    }

    /// A value per key; `ttl_ms` ≤ 0: no expiry, else a value expires
    /// `ttl_ms` after it was written.
    pub fn value<T: Codec>(&mut self, name: &str, ttl_ms: i64) -> ValueState<T> {
        ValueState { id: sys::state_declare(0, name.as_bytes(), ttl_ms), _t: PhantomData }
    }

    /// A value state whose values this version writes with schema version
    /// `schema` (ABI version 4): read with [`ValueState::get_with_schema`]
    /// to tell an older encoding apart. The module must be exported with
    /// `keyed_operator!(T, schema)`.
    pub fn value_with_schema<T: Codec>(&mut self, name: &str, ttl_ms: i64, schema: u32) -> ValueState<T> {
        ValueState { id: sys::state_declare2(0, name.as_bytes(), ttl_ms, schema), _t: PhantomData }
    }

    /// A list per key; each element expires on its own.
    pub fn list<T: Codec>(&mut self, name: &str, ttl_ms: i64) -> ListState<T> {
        ListState { id: sys::state_declare(1, name.as_bytes(), ttl_ms), _t: PhantomData }
    }

    /// A map per key, iterated in user-key byte order; each entry expires
    /// on its own.
    pub fn map<K: Codec, V: Codec>(&mut self, name: &str, ttl_ms: i64) -> MapState<K, V> {
        MapState { id: sys::state_declare(2, name.as_bytes(), ttl_ms), _t: PhantomData }
    }
}

/// Event time (watermarks) or processing time (the wall clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeDomain {
    EventTime = 0,
    ProcessingTime = 1,
}

/// A timer that fired, for the context's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timer {
    pub domain: TimeDomain,
    pub timestamp: i64,
}

/// What a keyed operator's calls get: the current key, its timers, time,
/// and (through `Deref`) the [`Emitter`].
pub struct Context {
    _private: (),
}

static mut CONTEXT: Context = Context { _private: () };

impl Context {
    pub(crate) fn get() -> &'static mut Context {
        unsafe { &mut CONTEXT }
    }

    /// The key of the record or timer being handled.
    pub fn key(&self) -> &[u8] {
        key()
    }

    /// Sets a timer for the current key (one per domain and time).
    pub fn register_timer(&mut self, domain: TimeDomain, timestamp: i64) {
        sys::timer_register(domain as i32, key(), timestamp)
    }

    /// Removes a timer of the current key (nothing if it is not set).
    pub fn delete_timer(&mut self, domain: TimeDomain, timestamp: i64) {
        sys::timer_delete(domain as i32, key(), timestamp)
    }

    /// The task's event-time watermark (ms; i64::MIN before the first).
    pub fn watermark(&self) -> i64 {
        sys::current_watermark()
    }

    /// The wall clock, ms since the epoch.
    pub fn processing_time(&self) -> i64 {
        sys::processing_time()
    }
}

impl Deref for Context {
    type Target = Emitter;
    fn deref(&self) -> &Emitter {
        emitter()
    }
}

impl DerefMut for Context {
    fn deref_mut(&mut self) -> &mut Emitter {
        emitter()
    }
}

/// A value per key.
pub struct ValueState<T> {
    id: i32,
    _t: PhantomData<fn() -> T>,
}

impl<T: Codec> ValueState<T> {
    /// The current key's value, `None` when absent or expired.
    pub fn get(&self, _ctx: &Context) -> Result<Option<T>> {
        let buf = scratch();
        match sys::state_get(self.id, key(), buf) {
            None => Ok(None),
            Some(_) => T::decode(buf).map(Some),
        }
    }

    /// The value and the schema version it was written with (ABI version
    /// 4; see [`Declare::value_with_schema`]). The value is decoded by the
    /// caller, who knows each schema's encoding.
    pub fn get_with_schema(&self, _ctx: &Context) -> Option<(Vec<u8>, u32)> {
        let buf = scratch();
        sys::state_get2(self.id, key(), buf).map(|(_, schema)| (buf.clone(), schema))
    }

    /// Sets the current key's value.
    pub fn put(&self, _ctx: &Context, v: &T) {
        sys::state_put(self.id, key(), encoded(v))
    }

    /// Removes the current key's value.
    pub fn clear(&self, _ctx: &Context) {
        sys::state_clear(self.id, key())
    }
}

// The next `u32 len, bytes` of a list or map read (ABI.md, state_list).
fn split_lengths<'b>(b: &'b [u8], at: &mut usize) -> Result<&'b [u8]> {
    let bad = || Error::new("eddy: the host returned a malformed list or map");
    if *at + 4 > b.len() {
        return Err(bad());
    }
    let n = crate::rt::get32(b, *at) as usize;
    *at += 4;
    let s = b.get(*at..*at + n).ok_or_else(bad)?;
    *at += n;
    Ok(s)
}

/// A list per key.
pub struct ListState<T> {
    id: i32,
    _t: PhantomData<fn() -> T>,
}

impl<T: Codec> ListState<T> {
    /// The current key's elements, oldest first (empty when none).
    pub fn get(&self, _ctx: &Context) -> Result<Vec<T>> {
        let buf = scratch();
        let mut out = Vec::new();
        if sys::state_list(self.id, key(), buf).is_some() {
            let mut at = 0;
            while at < buf.len() {
                out.push(T::decode(split_lengths(buf, &mut at)?)?);
            }
        }
        Ok(out)
    }

    /// Adds an element at the end.
    pub fn append(&self, _ctx: &Context, v: &T) {
        sys::state_append(self.id, key(), encoded(v))
    }

    /// Removes every element.
    pub fn clear(&self, _ctx: &Context) {
        sys::state_clear(self.id, key())
    }
}

/// A map per key.
pub struct MapState<K, V> {
    id: i32,
    _t: PhantomData<fn() -> (K, V)>,
}

impl<K: Codec, V: Codec> MapState<K, V> {
    pub fn get(&self, _ctx: &Context, k: &K) -> Result<Option<V>> {
        let uk = encoded_key(k);
        let buf = scratch();
        match sys::state_map_get(self.id, key(), uk, buf) {
            None => Ok(None),
            Some(_) => V::decode(buf).map(Some),
        }
    }

    pub fn put(&self, _ctx: &Context, k: &K, v: &V) {
        sys::state_map_put(self.id, key(), encoded_key(k), encoded(v))
    }

    pub fn remove(&self, _ctx: &Context, k: &K) {
        sys::state_map_delete(self.id, key(), encoded_key(k))
    }

    /// Every entry, in user-key byte order.
    pub fn entries(&self, _ctx: &Context) -> Result<Vec<(K, V)>> {
        let buf = scratch();
        let mut out = Vec::new();
        if sys::state_map_entries(self.id, key(), buf).is_some() {
            let mut at = 0;
            while at < buf.len() {
                let k = K::decode(split_lengths(buf, &mut at)?)?;
                let v = V::decode(split_lengths(buf, &mut at)?)?;
                out.push((k, v));
            }
        }
        Ok(out)
    }

    /// Removes every entry.
    pub fn clear(&self, _ctx: &Context) {
        sys::state_clear(self.id, key())
    }
}
