//! Fields the host extracts (ABI versions 6 and 7): an operator that reads
//! a few members of JSON values declares their paths once, in `open`; the
//! host then checks each record's value and finds those paths natively
//! while it writes the batch, and the operator reads what it found from
//! the record ([`Record::valid`](crate::Record::valid),
//! [`Record::field`](crate::Record::field),
//! [`Record::number`](crate::Record::number)) instead of scanning the
//! JSON itself.
//!
//! ```ignore
//! fn open(_config: &[u8]) -> Result<Op> {
//!     // path 0: "card"; path 1: the member price of the member bid;
//!     // path 2, a number path: amount, parsed by the host.
//!     fields::declare_with_numbers(&[&["card"][..], &["bid", "price"][..]], &[&["amount"]])?;
//!     Ok(Op {})
//! }
//!
//! fn process(&mut self, r: &Record<'_>, out: &mut Emitter) -> Result {
//!     if !r.valid() {
//!         return Ok(()); // not a JSON object
//!     }
//!     let card = r.field(0);       // Some(raw JSON bytes), None: absent
//!     let amount = r.number(2);    // None: absent or not a number
//!     …
//! }
//! ```
//!
//! The module must be exported with the `fields` flag
//! (`eddy::operator!(T, fields)`, `keyed_operator!(T, fields)`,
//! `keyed_co_operator!(T, fields)`), which declares ABI version 7, as
//! linking the Go and C SDKs' fields support does: version 7 includes the
//! keyed state of 2 and 4 and the two inputs of 5, and adds number paths
//! and values in parts ([`Emitter::emit_parts`](crate::Emitter::emit_parts)).
//! Without the flag, a module that calls [`declare`] is refused when it is
//! loaded: it imports `eddy.fields` but declares an older version.
//!
//! A span is the member's raw value (a string with its quotes and escapes,
//! an object or array whole): [`crate::json`] reads it. Keys compare after
//! unescaping; at each level the first member of a name counts; a path
//! through a value that is not an object is absent. Fields exist for the
//! records of `process` (both inputs of a two-input operator); timers,
//! window functions and aggregates have no field table.

use crate::rt::{self, get32, PARTS_VERSION};
use crate::{sys, Error, Part, Record, Result};

/// The ABI's limits: paths per module, keys per path.
pub const MAX_PATHS: usize = 64;
pub const MAX_KEYS: usize = 8;

const NUMBER_PATH: u32 = 1 << 31;

// The declared paths (0: none, and batches have no field table) and how
// many of them, the first ones, are span paths.
static mut PATHS: usize = 0;
static mut SPAN_PATHS: usize = 0;

/// The size of a field table row, 0 when the instance declared nothing.
pub(crate) fn row_size() -> usize {
    let n = unsafe { PATHS };
    if n == 0 {
        0
    } else {
        4 + 8 * n
    }
}

pub(crate) fn span_paths() -> usize {
    unsafe { SPAN_PATHS }
}

pub(crate) fn paths() -> usize {
    unsafe { PATHS }
}

/// Declares the paths this instance reads, numbered from 0 in this order
/// for [`Record::field`]: `["bid", "price"]` is the member `price` of the
/// object that is the member `bid` of the value. Call it once, from
/// `open`. The host checks the list (1 to 64 paths of 1 to 8 keys, no path
/// twice) and fails the open with a message naming what is wrong.
pub fn declare<P: AsRef<[S]>, S: AsRef<str>>(paths: &[P]) -> Result {
    let none: &[P] = &[];
    declare_with_numbers(paths, none)
}

/// [`declare`] with number paths too (ABI version 7): the span paths are
/// numbered from 0, the number paths from `spans.len()` on, and
/// [`Record::number`] reads them. A path may be in both lists (the host
/// finds it once).
pub fn declare_with_numbers<P: AsRef<[S]>, S: AsRef<str>, Q: AsRef<[T]>, T: AsRef<str>>(
    spans: &[P],
    numbers: &[Q],
) -> Result {
    if !rt::opening() {
        return Err(Error::new(
            "fields: declare called outside open: the host takes a module's fields only during eddy_open",
        ));
    }
    if paths() > 0 {
        return Err(Error::new(
            "fields: declare called twice: a module declares its fields once, all in one call",
        ));
    }
    if rt::version() < PARTS_VERSION {
        return Err(Error::new(format!(
            "fields: declare needs ABI version 7, and the module declares {}: export it with the fields flag, as eddy::operator!(T, fields)",
            rt::version()
        )));
    }
    let mut list = Vec::new();
    let put = |list: &mut Vec<u8>, v: u32| list.extend_from_slice(&v.to_le_bytes());
    put(&mut list, (spans.len() + numbers.len()) as u32);
    let path = |list: &mut Vec<u8>, keys: &[&str], flag: u32| {
        put(list, keys.len() as u32 | flag);
        for k in keys {
            put(list, k.len() as u32);
            list.extend_from_slice(k.as_bytes());
        }
    };
    let mut keys: Vec<&str> = Vec::with_capacity(MAX_KEYS);
    for p in spans {
        keys.clear();
        keys.extend(p.as_ref().iter().map(|k| k.as_ref()));
        path(&mut list, &keys, 0);
    }
    for p in numbers {
        keys.clear();
        keys.extend(p.as_ref().iter().map(|k| k.as_ref()));
        path(&mut list, &keys, NUMBER_PATH);
    }
    // The host checks the list; a bad one traps this call with its message.
    sys::fields(&list);
    unsafe {
        PATHS = spans.len() + numbers.len();
        SPAN_PATHS = spans.len();
    }
    Ok(())
}

/// A record's row of the field table: empty for a record of a batch
/// without one (nothing declared, a timer, a record the operator built).
/// [`Record`]'s accessors read it.
#[derive(Clone, Copy, Debug)]
pub struct FieldRow<'a> {
    pub(crate) batch: &'a [u8],
    pub(crate) row: &'a [u8],
}

impl FieldRow<'static> {
    /// No row: what a record the operator builds has.
    pub const NONE: FieldRow<'static> = FieldRow { batch: &[], row: &[] };
}

impl Default for FieldRow<'_> {
    fn default() -> Self {
        FieldRow::NONE
    }
}

const ABSENT: u32 = 0xFFFF_FFFF;

impl<'a> Record<'a> {
    /// Whether the record's value is one valid JSON object (false, with
    /// every field absent, for a record without a field row).
    pub fn valid(&self) -> bool {
        self.fields.row.len() >= 4 && get32(self.fields.row, 0) == 1
    }

    /// The raw bytes of span path `j`'s value (a string with its quotes and
    /// escapes, an object or array whole), `None` when absent, when the
    /// value is not a valid JSON object, or when `j` is not a span path.
    /// The bytes are the record's: valid as long as it is.
    pub fn field(&self, j: usize) -> Option<&'a [u8]> {
        let row = self.fields.row;
        if j >= span_paths() || row.len() < 12 + 8 * j {
            return None;
        }
        let (off, len) = (get32(row, 4 + 8 * j), get32(row, 8 + 8 * j));
        if off == ABSENT {
            return None;
        }
        // The host puts spans inside the value; one outside the batch (a
        // broken host) reads as absent rather than past it.
        self.fields.batch.get(off as usize..off as usize + len as usize)
    }

    /// Sets `spans[j]` to [`field(j)`](Record::field) for the first
    /// `spans.len()` paths and returns [`valid`](Record::valid): one call
    /// for an operator that reads every field of each record.
    pub fn spans(&self, spans: &mut [Option<&'a [u8]>]) -> bool {
        for (j, s) in spans.iter_mut().enumerate() {
            *s = self.field(j);
        }
        self.valid()
    }

    /// [`spans`](Record::spans) with [`Part`]s: `parts[j]` names span
    /// path `j`'s value, [`Part::EMPTY`] when absent, for
    /// [`Emitter::emit_part_list`](crate::Emitter::emit_part_list).
    pub fn span_parts(&self, parts: &mut [Part]) -> bool {
        for (j, p) in parts.iter_mut().enumerate() {
            *p = self.field(j).map_or(Part::EMPTY, Part::of);
        }
        self.valid()
    }

    /// The value of number path `j` (numbered after the span paths, see
    /// [`declare_with_numbers`]) as the host parsed it, the nearest f64
    /// (±infinity beyond its range); `None` when the path is absent, its
    /// value is not a JSON number, the record's value is not a valid JSON
    /// object, or `j` is not a number path.
    pub fn number(&self, j: usize) -> Option<f64> {
        let row = self.fields.row;
        if j < span_paths() || j >= paths() || row.len() < 12 + 8 * j {
            return None;
        }
        let mut x = [0u8; 8];
        x.copy_from_slice(&row[4 + 8 * j..12 + 8 * j]);
        let x = f64::from_le_bytes(x);
        if x.is_nan() {
            None
        } else {
            Some(x)
        }
    }
}
