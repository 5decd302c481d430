//! The "card-stats" example aggregate in Rust: an aggregate module (ABI
//! version 3) that sums up each window's card transactions. It mirrors
//! udfs/cardstats/stats, which documents the result and the accumulator
//! encoding; Go, C and Rust produce the same bytes, accumulators included.
//! Change them together.

use eddy::json::{self, Kind, Step};
use eddy::{Aggregate, Error, Record, Result};
use std::cmp::Ordering;

const FORMAT: u8 = 1;
const MAX_COUNTRY_LEN: usize = 255;
const MAX_CENTS: f64 = 9007199254740992.0; // 2^53
const MAX_VARINT_LEN: usize = 10;

/// A decoded accumulator; list aliases the bytes it was decoded from.
struct Acc<'a> {
    n: u64,
    sum: i64,
    max: i64,
    countries: u32,
    list: &'a [u8],
}

fn malformed(len: usize, why: &str) -> Error {
    Error::new(format!("card-stats: malformed accumulator ({} bytes): {}", len, why))
}

// A minimal unsigned varint (encoding/binary's rules, refusing encodings
// longer than necessary).
fn uvarint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut x = 0u64;
    let mut i = 0;
    while *at + i < b.len() && i < MAX_VARINT_LEN {
        let c = b[*at + i];
        if c < 0x80 {
            if (i == MAX_VARINT_LEN - 1 && c > 1) || (i > 0 && c == 0) {
                return None;
            }
            *at += i + 1;
            return Some(x | (c as u64) << (7 * i));
        }
        x |= ((c & 0x7f) as u64) << (7 * i);
        i += 1;
    }
    None
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn zigzag(v: i64) -> u64 {
    ((v as u64) << 1) ^ ((v >> 63) as u64)
}

fn decode(b: &[u8]) -> Result<Acc<'_>> {
    let len = b.len();
    if len == 0 {
        return Err(malformed(len, "empty"));
    }
    if b[0] != FORMAT {
        return Err(Error::new(format!("card-stats: malformed accumulator ({} bytes): format {}, want 1", len, b[0])));
    }
    let mut at = 1;
    let mut fields = [0u64; 3];
    for f in fields.iter_mut() {
        *f = uvarint(b, &mut at).ok_or_else(|| malformed(len, "bad varint"))?;
    }
    let list = &b[at..];
    let mut countries = 0u32;
    let mut prev: &[u8] = &[];
    let mut i = 0;
    while i < list.len() {
        let end = i + 1 + list[i] as usize;
        if end > list.len() {
            return Err(malformed(len, "truncated country"));
        }
        let c = &list[i + 1..end];
        if countries > 0 && prev >= c {
            return Err(malformed(len, "countries out of order"));
        }
        prev = c;
        i = end;
        countries += 1;
    }
    let a = Acc { n: fields[0], sum: unzigzag(fields[1]), max: unzigzag(fields[2]), countries, list };
    if (a.n == 0 && (a.sum != 0 || a.max != 0 || a.countries != 0))
        || (a.n != 0 && (a.countries == 0 || a.countries as u64 > a.n))
    {
        return Err(malformed(len, "inconsistent counts"));
    }
    Ok(a)
}

fn put_uvarint(dst: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        dst.push(x as u8 | 0x80);
        x >>= 7;
    }
    dst.push(x as u8);
}

fn put_header(dst: &mut Vec<u8>, n: u64, sum: i64, max: i64) {
    dst.push(FORMAT);
    put_uvarint(dst, n);
    put_uvarint(dst, zigzag(sum));
    put_uvarint(dst, zigzag(max));
}

// Formats c/100 with exactly two decimals.
fn put_cents(dst: &mut Vec<u8>, c: i64) {
    let u = c.unsigned_abs();
    if c < 0 {
        dst.push(b'-');
    }
    eddy::append_u64(dst, u / 100);
    dst.push(b'.');
    dst.push(b'0' + (u % 100 / 10) as u8);
    dst.push(b'0' + (u % 10) as u8);
}

struct CardStats {
    country: Vec<u8>, // the unescaped country of the transaction being added
}

impl CardStats {
    // The amount in cents of a transaction and its country (into
    // self.country), or None when it does not count. It takes the first
    // "amount" and the first "country", as a lookup would.
    fn parse_txn(&mut self, v: &[u8]) -> Option<i64> {
        let mut it = json::objects(v)?;
        let (mut amount, mut c): (Option<&[u8]>, Option<&[u8]>) = (None, None);
        loop {
            match it.next_step() {
                Step::Field(k, val) => {
                    if amount.is_none() && json::equal(k, b"amount") {
                        amount = Some(val);
                    } else if c.is_none() && json::equal(k, b"country") {
                        c = Some(val);
                    }
                }
                Step::End => break,
                Step::Malformed => return None,
            }
        }
        let (amount, c) = (amount?, c?);
        if json::kind_of(amount) != Kind::Number || json::kind_of(c) != Kind::String {
            return None;
        }
        let x = (json::number(amount)? * 100.0).round();
        if !(x.abs() <= MAX_CENTS) {
            return None;
        }
        self.country.clear();
        json::unquote_into(c, &mut self.country);
        if self.country.len() > MAX_COUNTRY_LEN {
            return None;
        }
        Some(x as i64)
    }
}

impl Aggregate for CardStats {
    fn open(config: &[u8]) -> Result<CardStats> {
        let mut it = json::objects(config).ok_or("card-stats: config is not a JSON object")?;
        match it.next_step() {
            Step::Malformed => Err("card-stats: config is not valid JSON".into()),
            Step::Field(k, _) => Err(format!(
                "card-stats: config: unknown key {} (card-stats takes no configuration)",
                String::from_utf8_lossy(k)
            )
            .into()),
            Step::End => Ok(CardStats { country: Vec::new() }),
        }
    }

    fn create(&mut self, out: &mut Vec<u8>) -> Result {
        put_header(out, 0, 0, 0);
        Ok(())
    }

    fn add(&mut self, acc: &[u8], r: &Record<'_>, out: &mut Vec<u8>) -> Result {
        let cents = self.parse_txn(r.value);
        let a = decode(acc)?;
        let cents = match cents {
            Some(c) => c,
            None => {
                out.extend_from_slice(acc);
                return Ok(());
            }
        };
        let top = if a.n > 0 && a.max > cents { a.max } else { cents };
        put_header(out, a.n + 1, a.sum.wrapping_add(cents), top);
        let mut pos = 0;
        while pos < a.list.len() {
            let end = pos + 1 + a.list[pos] as usize;
            match a.list[pos + 1..end].cmp(&self.country[..]) {
                Ordering::Equal => {
                    out.extend_from_slice(a.list);
                    return Ok(());
                }
                Ordering::Greater => break,
                Ordering::Less => pos = end,
            }
        }
        out.extend_from_slice(&a.list[..pos]);
        out.push(self.country.len() as u8);
        out.extend_from_slice(&self.country);
        out.extend_from_slice(&a.list[pos..]);
        Ok(())
    }

    fn merge(&mut self, xa: &[u8], ya: &[u8], out: &mut Vec<u8>) -> Result {
        let x = decode(xa)?;
        let y = decode(ya)?;
        let top = if x.n == 0 || (y.n > 0 && y.max > x.max) { y.max } else { x.max };
        put_header(out, x.n.wrapping_add(y.n), x.sum.wrapping_add(y.sum), top);
        let (mut i, mut j) = (0, 0);
        while i < x.list.len() && j < y.list.len() {
            let ie = i + 1 + x.list[i] as usize;
            let je = j + 1 + y.list[j] as usize;
            match x.list[i + 1..ie].cmp(&y.list[j + 1..je]) {
                Ordering::Less => {
                    out.extend_from_slice(&x.list[i..ie]);
                    i = ie;
                }
                Ordering::Greater => {
                    out.extend_from_slice(&y.list[j..je]);
                    j = je;
                }
                Ordering::Equal => {
                    out.extend_from_slice(&x.list[i..ie]);
                    i = ie;
                    j = je;
                }
            }
        }
        out.extend_from_slice(&x.list[i..]);
        out.extend_from_slice(&y.list[j..]);
        Ok(())
    }

    fn result(&mut self, acc: &[u8], out: &mut Vec<u8>) -> Result {
        let a = decode(acc)?;
        out.extend_from_slice(b"{\"n\":");
        eddy::append_u64(out, a.n);
        out.extend_from_slice(b",\"total\":\"");
        put_cents(out, a.sum);
        if a.n == 0 {
            out.extend_from_slice(b"\",\"max\":null");
        } else {
            out.extend_from_slice(b"\",\"max\":\"");
            put_cents(out, a.max);
            out.push(b'"');
        }
        out.extend_from_slice(b",\"countries\":");
        eddy::append_u64(out, a.countries as u64);
        out.push(b'}');
        Ok(())
    }
}

eddy::aggregate!(CardStats);
