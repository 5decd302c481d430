//! A small, allocation-free JSON scanner for operators that look at a few
//! fields of each record: iterate an object's members or an array's
//! elements, find a member by name, compare or unquote a string, read a
//! number. Values come back as raw slices of the input, so a projection can
//! copy them without decoding and re-encoding. It does not build trees.
//!
//! It mirrors `abi/jsonscan` (Go) and `sdk/c/eddy_json.c` function by
//! function, so that an operator written in Go, C or Rust keeps and drops
//! exactly the same records: change them together. What it scans is
//! validated (RFC 8259, except that bytes are not checked for valid UTF-8),
//! no input makes it panic, and nesting deeper than [`MAX_DEPTH`] is
//! malformed, which keeps the scanner iterative with a fixed stack.

/// The deepest nesting of arrays and objects inside a value.
pub const MAX_DEPTH: usize = 512;

/// The type of a JSON value, judged by its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    Object,
    Array,
    String,
    Number,
    True,
    False,
    Null,
}

/// The result of one iteration step or lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// A member (key with its quotes, empty for arrays; raw value).
    Field(&'a [u8], &'a [u8]),
    /// No more members; the whole input has been checked.
    End,
    /// Not valid JSON, or not the expected kind (then forever).
    Malformed,
}

fn is_space(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'\n' || c == b'\r'
}

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn hex_val(c: u8) -> i32 {
    match c {
        b'0'..=b'9' => (c - b'0') as i32,
        b'a'..=b'f' => (c - b'a' + 10) as i32,
        b'A'..=b'F' => (c - b'A' + 10) as i32,
        _ => -1,
    }
}

// Positions are isize like Go's int, and -1 means "not valid", as in the
// Go and C versions, so that the three read the same.
fn hex4(b: &[u8], i: isize) -> i32 {
    if i < 0 || i as usize + 4 > b.len() {
        return -1;
    }
    let mut r = 0;
    for &c in &b[i as usize..i as usize + 4] {
        let h = hex_val(c);
        if h < 0 {
            return -1;
        }
        r = r << 4 | h;
    }
    r
}

fn skip_space(b: &[u8], mut i: isize) -> isize {
    while (i as usize) < b.len() && is_space(b[i as usize]) {
        i += 1;
    }
    i
}

fn at(b: &[u8], i: isize) -> Option<u8> {
    if i >= 0 && (i as usize) < b.len() {
        Some(b[i as usize])
    } else {
        None
    }
}

fn string_end(b: &[u8], mut i: isize) -> isize {
    i += 1;
    while let Some(c) = at(b, i) {
        if c == b'"' {
            return i + 1;
        }
        if c == b'\\' {
            match at(b, i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    if hex4(b, i + 2) < 0 {
                        return -1;
                    }
                    i += 6;
                }
                _ => return -1,
            }
        } else if c < 0x20 {
            return -1;
        } else {
            i += 1;
        }
    }
    -1
}

fn number_end(b: &[u8], mut i: isize) -> isize {
    if at(b, i) == Some(b'-') {
        i += 1;
    }
    match at(b, i) {
        Some(b'0') => i += 1,
        Some(c) if is_digit(c) => {
            while at(b, i).map_or(false, is_digit) {
                i += 1;
            }
        }
        _ => return -1,
    }
    if at(b, i) == Some(b'.') {
        i += 1;
        let start = i;
        while at(b, i).map_or(false, is_digit) {
            i += 1;
        }
        if i == start {
            return -1;
        }
    }
    if matches!(at(b, i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(at(b, i), Some(b'+' | b'-')) {
            i += 1;
        }
        let start = i;
        while at(b, i).map_or(false, is_digit) {
            i += 1;
        }
        if i == start {
            return -1;
        }
    }
    i
}

fn literal_end(b: &[u8], i: isize, lit: &[u8]) -> isize {
    let u = i as usize;
    if b.len() - u < lit.len() || &b[u..u + lit.len()] != lit {
        return -1;
    }
    i + lit.len() as isize
}

fn member_value(b: &[u8], i: isize) -> isize {
    if at(b, i) != Some(b'"') {
        return -1;
    }
    let i = string_end(b, i);
    if i < 0 {
        return -1;
    }
    let i = skip_space(b, i);
    if at(b, i) != Some(b':') {
        return -1;
    }
    skip_space(b, i + 1)
}

fn value_end_at(b: &[u8], mut i: isize) -> isize {
    let mut objects = [0u8; MAX_DEPTH / 8]; // bit d set: level d is an object
    let mut depth = 0usize;
    loop {
        let c = match at(b, i) {
            Some(c) => c,
            None => return -1,
        };
        if c == b'{' || c == b'[' {
            if depth == MAX_DEPTH {
                return -1;
            }
            if c == b'{' {
                objects[depth / 8] |= 1 << (depth % 8);
            } else {
                objects[depth / 8] &= !(1 << (depth % 8));
            }
            depth += 1;
            i = skip_space(b, i + 1);
            let next = at(b, i);
            if (next == Some(b'}') && c == b'{') || (next == Some(b']') && c == b'[') {
                depth -= 1;
                i += 1; // an empty container is a complete value
            } else {
                if c == b'{' {
                    i = member_value(b, i);
                }
                continue;
            }
        } else if c == b'"' {
            i = string_end(b, i);
        } else if c == b'-' || is_digit(c) {
            i = number_end(b, i);
        } else if c == b't' {
            i = literal_end(b, i, b"true");
        } else if c == b'f' {
            i = literal_end(b, i, b"false");
        } else if c == b'n' {
            i = literal_end(b, i, b"null");
        } else {
            return -1;
        }
        if i < 0 {
            return -1;
        }
        // A value ended at b[i]: close containers until one continues.
        loop {
            if depth == 0 {
                return i;
            }
            i = skip_space(b, i);
            let c = match at(b, i) {
                Some(c) => c,
                None => return -1,
            };
            let object = objects[(depth - 1) / 8] & (1 << ((depth - 1) % 8)) != 0;
            if c == b',' {
                i = skip_space(b, i + 1);
                if object {
                    i = member_value(b, i);
                }
                break;
            }
            if (object && c == b'}') || (!object && c == b']') {
                depth -= 1;
                i += 1;
                continue;
            }
            return -1;
        }
    }
}

/// The index just after the JSON value starting at `b[i]` (no leading
/// whitespace), or `None` if there is no valid value there.
pub fn value_end(b: &[u8], i: usize) -> Option<usize> {
    let e = value_end_at(b, i as isize);
    if e < 0 {
        None
    } else {
        Some(e as usize)
    }
}

/// Whether `b` is exactly one JSON value, optionally surrounded by
/// whitespace.
pub fn valid(b: &[u8]) -> bool {
    let i = skip_space(b, 0);
    let end = value_end_at(b, i);
    end >= 0 && skip_space(b, end) as usize == b.len()
}

/// The kind of a raw value, judged by its first byte.
pub fn kind_of(v: &[u8]) -> Kind {
    match v.first() {
        None => Kind::Invalid,
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::Array,
        Some(b'"') => Kind::String,
        Some(&c) if c == b'-' || is_digit(c) => Kind::Number,
        Some(b't') => Kind::True,
        Some(b'f') => Kind::False,
        Some(b'n') => Kind::Null,
        _ => Kind::Invalid,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum IterState {
    First,
    More,
    Done,
    Bad,
}

/// An iterator over an object's members or an array's elements. The
/// container must be the whole input, optionally surrounded by whitespace.
pub struct Iter<'a> {
    buf: &'a [u8],
    pos: isize,
    object: bool,
    state: IterState,
}

impl<'a> Iter<'a> {
    fn begin(b: &'a [u8], open: u8, object: bool) -> Option<Iter<'a>> {
        let i = skip_space(b, 0);
        if at(b, i) != Some(open) {
            return None;
        }
        Some(Iter { buf: b, pos: i + 1, object, state: IterState::First })
    }

    fn fail(&mut self) -> Step<'a> {
        self.state = IterState::Bad;
        Step::Malformed
    }

    /// The next member, [`Step::End`] after the last one once the whole
    /// input has been checked, or [`Step::Malformed`].
    pub fn next_step(&mut self) -> Step<'a> {
        let b = self.buf;
        let closer = if self.object { b'}' } else { b']' };
        match self.state {
            IterState::Done => return Step::End,
            IterState::Bad => return Step::Malformed,
            _ => {}
        }
        let mut i = skip_space(b, self.pos);
        if at(b, i) == Some(closer) {
            if skip_space(b, i + 1) as usize != b.len() {
                return self.fail();
            }
            self.state = IterState::Done;
            return Step::End;
        }
        if self.state == IterState::More {
            if at(b, i) != Some(b',') {
                return self.fail();
            }
            i = skip_space(b, i + 1);
        }
        let mut key: &'a [u8] = &[];
        if self.object {
            if at(b, i) != Some(b'"') {
                return self.fail();
            }
            let key_end = string_end(b, i);
            if key_end < 0 {
                return self.fail();
            }
            key = &b[i as usize..key_end as usize];
            i = skip_space(b, key_end);
            if at(b, i) != Some(b':') {
                return self.fail();
            }
            i = skip_space(b, i + 1);
        }
        let end = value_end_at(b, i);
        if end < 0 {
            return self.fail();
        }
        self.pos = end;
        self.state = IterState::More;
        Step::Field(key, &b[i as usize..end as usize])
    }
}

/// Starts iterating the object in `b`; `None` unless `b` starts, after
/// whitespace, with `{`.
pub fn objects(b: &[u8]) -> Option<Iter<'_>> {
    Iter::begin(b, b'{', true)
}

/// Starts iterating the array in `b`; `None` unless `b` starts, after
/// whitespace, with `[`.
pub fn elements(b: &[u8]) -> Option<Iter<'_>> {
    Iter::begin(b, b'[', false)
}

/// The value of the first member called `name` (compared after unescaping)
/// of the object in `b`, checking the whole object: `Field` when found,
/// `End` when absent, `Malformed` when `b` is not a valid object.
pub fn lookup<'a>(b: &'a [u8], name: &[u8]) -> Step<'a> {
    let mut it = match objects(b) {
        Some(it) => it,
        None => return Step::Malformed,
    };
    let mut found = Step::End;
    loop {
        match it.next_step() {
            Step::Malformed => return Step::Malformed,
            Step::End => return found,
            Step::Field(k, v) => {
                if found == Step::End && equal(k, name) {
                    found = Step::Field(k, v);
                }
            }
        }
    }
}

/// The value of the first member `name` of the object `b` when it is
/// there and the object is valid.
pub fn field<'a>(b: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    match lookup(b, name) {
        Step::Field(_, v) => Some(v),
        _ => None,
    }
}

fn content(raw: &[u8]) -> Option<&[u8]> {
    if raw.len() < 2 || raw[0] != b'"' || raw[raw.len() - 1] != b'"' {
        return None;
    }
    Some(&raw[1..raw.len() - 1])
}

fn encode_rune(buf: &mut [u8; 4], r: i32) -> usize {
    if r < 0x80 {
        buf[0] = r as u8;
        1
    } else if r < 0x800 {
        buf[0] = (0xC0 | r >> 6) as u8;
        buf[1] = (0x80 | (r & 0x3F)) as u8;
        2
    } else if r < 0x10000 {
        buf[0] = (0xE0 | r >> 12) as u8;
        buf[1] = (0x80 | (r >> 6 & 0x3F)) as u8;
        buf[2] = (0x80 | (r & 0x3F)) as u8;
        3
    } else {
        buf[0] = (0xF0 | r >> 18) as u8;
        buf[1] = (0x80 | (r >> 12 & 0x3F)) as u8;
        buf[2] = (0x80 | (r >> 6 & 0x3F)) as u8;
        buf[3] = (0x80 | (r & 0x3F)) as u8;
        4
    }
}

// Decodes the escape at c[i] (a backslash) into buf; returns the byte count
// and the index after the sequence. Lone surrogates become U+FFFD; a
// sequence the scanner would reject is taken literally (one backslash).
fn unescape(c: &[u8], i: usize, buf: &mut [u8; 4]) -> (usize, usize) {
    if i + 1 >= c.len() {
        buf[0] = b'\\';
        return (1, i + 1);
    }
    let one = |buf: &mut [u8; 4], b: u8| {
        buf[0] = b;
        (1, i + 2)
    };
    match c[i + 1] {
        b'"' | b'\\' | b'/' => one(buf, c[i + 1]),
        b'b' => one(buf, 8),
        b'f' => one(buf, 12),
        b'n' => one(buf, b'\n'),
        b'r' => one(buf, b'\r'),
        b't' => one(buf, b'\t'),
        b'u' => {
            let mut r = hex4(c, i as isize + 2);
            if r < 0 {
                buf[0] = b'\\';
                return (1, i + 1);
            }
            let mut next = i + 6;
            if (0xD800..0xDC00).contains(&r) {
                let lo = if next + 1 < c.len() && c[next] == b'\\' && c[next + 1] == b'u' {
                    hex4(c, next as isize + 2)
                } else {
                    -1
                };
                if (0xDC00..0xE000).contains(&lo) {
                    r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
                    next += 6;
                } else {
                    r = 0xFFFD;
                }
            } else if (0xDC00..0xE000).contains(&r) {
                r = 0xFFFD;
            }
            (encode_rune(buf, r), next)
        }
        _ => {
            buf[0] = b'\\';
            (1, i + 1)
        }
    }
}

/// Whether the raw string `raw` (with its quotes), once unescaped, equals
/// `s`.
pub fn equal(raw: &[u8], s: &[u8]) -> bool {
    let c = match content(raw) {
        Some(c) => c,
        None => return false,
    };
    if s.len() > c.len() {
        return false; // unescaping never lengthens
    }
    let (mut i, mut k) = (0, 0);
    let mut buf = [0u8; 4];
    while i < c.len() {
        if c[i] != b'\\' {
            if k >= s.len() || s[k] != c[i] {
                return false;
            }
            k += 1;
            i += 1;
            continue;
        }
        let (m, next) = unescape(c, i, &mut buf);
        if s.len() - k < m || s[k..k + m] != buf[..m] {
            return false;
        }
        k += m;
        i = next;
    }
    k == s.len()
}

/// Appends the unescaped content of the raw string `raw` to `dst`. Lone
/// surrogates become U+FFFD; a span that is not a string appends nothing.
pub fn unquote_into(raw: &[u8], dst: &mut Vec<u8>) {
    let c = match content(raw) {
        Some(c) => c,
        None => return,
    };
    let mut i = 0;
    let mut buf = [0u8; 4];
    while i < c.len() {
        if c[i] != b'\\' {
            let start = i;
            while i < c.len() && c[i] != b'\\' {
                i += 1;
            }
            dst.extend_from_slice(&c[start..i]);
            continue;
        }
        let (m, next) = unescape(c, i, &mut buf);
        dst.extend_from_slice(&buf[..m]);
        i = next;
    }
}

/// The unescaped content of the raw string `raw`.
pub fn unquote(raw: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(raw.len());
    unquote_into(raw, &mut v);
    v
}

/// Appends `s` as a JSON string, as Go's `jsonscan.AppendQuote` does: `"`
/// and `\` are escaped, control characters use their short escape or
/// `\u00XX`, every other byte is copied.
pub fn quote_into(dst: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    dst.reserve(s.len() + 2);
    dst.push(b'"');
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        if c >= 0x20 && c != b'"' && c != b'\\' {
            continue;
        }
        dst.extend_from_slice(&s[start..i]);
        start = i + 1;
        match c {
            b'"' | b'\\' => dst.extend_from_slice(&[b'\\', c]),
            8 => dst.extend_from_slice(b"\\b"),
            12 => dst.extend_from_slice(b"\\f"),
            b'\n' => dst.extend_from_slice(b"\\n"),
            b'\r' => dst.extend_from_slice(b"\\r"),
            b'\t' => dst.extend_from_slice(b"\\t"),
            _ => dst.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]),
        }
    }
    dst.extend_from_slice(&s[start..]);
    dst.push(b'"');
}

const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    1e19, 1e20, 1e21, 1e22,
];

// Clinger's fast path, as in the Go and C versions: at most 19 digits whose
// value fits in 53 bits, divided by a power of ten up to 22, round once.
fn fast_number(b: &[u8]) -> Option<f64> {
    let (mut i, mut digits, mut exp10, mut mant) = (0, 0, 0usize, 0u64);
    let neg = b.first() == Some(&b'-');
    if neg {
        i += 1;
    }
    while i < b.len() && is_digit(b[i]) {
        digits += 1;
        if digits > 19 {
            return None;
        }
        mant = mant * 10 + (b[i] - b'0') as u64;
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && is_digit(b[i]) {
            digits += 1;
            if digits > 19 {
                return None;
            }
            mant = mant * 10 + (b[i] - b'0') as u64;
            exp10 += 1;
            i += 1;
        }
    }
    if i != b.len() || mant > 1 << 53 || exp10 > 22 {
        return None;
    }
    let v = mant as f64 / POW10[exp10];
    Some(if neg { -v } else { v })
}

/// If `raw` is exactly one JSON number, its nearest `f64` (±infinity beyond
/// the range), as Go's `strconv.ParseFloat` rounds.
pub fn number(raw: &[u8]) -> Option<f64> {
    if raw.is_empty() || number_end(raw, 0) != raw.len() as isize {
        return None;
    }
    if let Some(v) = fast_number(raw) {
        return Some(v);
    }
    // A JSON number is ASCII, and Rust's parser rounds correctly and gives
    // ±inf beyond the range, as strconv.ParseFloat does.
    core::str::from_utf8(raw).ok()?.parse::<f64>().ok()
}
