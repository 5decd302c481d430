//! rustfields: a test operator for rustfields_test.go, the Rust SDK's
//! fields (eddy::fields, ABI versions 6 and 7) in the real host. It speaks
//! the protocol of ../fieldsguest (the Go SDK's): its configuration is a
//! mode byte and a field list (abi.EncodeFields):
//!
//!   'F' list   declare list in open
//!   '2' list   declare it twice in open (the second declare fails open)
//!   'P' list   declare it during the first process (fails it)
//!   'N'        declare nothing
//!   'M' list   declare_with_numbers (its number paths after its span
//!              paths); each number path echoes as "|" and the number, or
//!              "|-" when absent
//!   'E' list   as 'F', but emit the echo with emit_parts: the record's
//!              spans and static constants, which the host gathers
//!   'L' list   as 'E', with Parts: span_parts, constants made Parts once
//!              in open, and emit_part_list
//!
//! Each output value is the validity digit, then for each path "|" and the
//! span's bytes, or "|-" when absent; with 'N', the value unchanged. It
//! fails the call when Record::spans disagrees with valid and field.
//! Built with --cfg co it is a two-input operator whose inputs both echo,
//! the right one with its output key prefixed by "r:".

use eddy::{fields, Emitter, Error, Part, Record, Result};

static DIGITS: &[u8] = b"01";
static BAR: &[u8] = b"|";
static DASH: &[u8] = b"-";

struct Guest {
    mode: u8,
    spans: Vec<Vec<String>>,
    numbers: Vec<Vec<String>>,
    out: Vec<u8>,
    key: Vec<u8>,
    span_parts: Vec<Part>,
    list: Vec<Part>,
    zero: Part,
    one: Part,
    bar: Part,
    dash: Part,
}

fn get32(b: &[u8], at: &mut usize) -> Result<u32> {
    let v = b.get(*at..*at + 4).ok_or("rustfields: a short field list")?;
    *at += 4;
    Ok(u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
}

fn open(config: &[u8]) -> Result<Guest> {
    let mode = *config.first().ok_or("rustfields: empty config")?;
    let mut g = Guest {
        mode,
        spans: Vec::new(),
        numbers: Vec::new(),
        out: Vec::new(),
        key: Vec::new(),
        span_parts: Vec::new(),
        list: Vec::new(),
        zero: Part::of(&DIGITS[0..1]),
        one: Part::of(&DIGITS[1..2]),
        bar: Part::of(BAR),
        dash: Part::of(DASH),
    };
    if mode == b'N' {
        return Ok(g);
    }
    let (list, mut at) = (&config[1..], 0);
    let n = get32(list, &mut at)?;
    for _ in 0..n {
        let k = get32(list, &mut at)?;
        let mut path = Vec::new();
        for _ in 0..k & 0x7fff_ffff {
            let l = get32(list, &mut at)? as usize;
            let key = list.get(at..at + l).ok_or("rustfields: a short field list")?;
            at += l;
            path.push(String::from_utf8(key.to_vec()).map_err(|_| Error::new("rustfields: a key is not UTF-8"))?);
        }
        if k & 0x8000_0000 != 0 {
            g.numbers.push(path);
        } else if !g.numbers.is_empty() {
            return Err("rustfields: a span path after a number path".into());
        } else {
            g.spans.push(path);
        }
    }
    g.span_parts = vec![Part::EMPTY; g.spans.len()];
    match mode {
        b'F' | b'E' | b'L' => fields::declare(&g.spans)?,
        b'M' => fields::declare_with_numbers(&g.spans, &g.numbers)?,
        b'2' => {
            fields::declare(&g.spans)?;
            fields::declare(&g.spans)?;
        }
        _ => {}
    }
    Ok(g)
}

impl Guest {
    fn echo(&mut self, r: &Record<'_>, right: bool, out: &mut Emitter) -> Result {
        self.key.clear();
        if right {
            self.key.extend_from_slice(b"r:");
        }
        self.key.extend_from_slice(r.key);
        let o = Record { key: &self.key, value: &[], timestamp: r.timestamp, ..*r };
        match self.mode {
            b'P' => return fields::declare(&self.spans),
            b'N' => return out.emit(&Record { value: r.value, ..o }),
            b'E' => {
                let mut spans = vec![None; self.spans.len()];
                let valid = r.spans(&mut spans);
                let mut parts: Vec<&[u8]> = vec![if valid { &DIGITS[1..2] } else { &DIGITS[0..1] }];
                for s in &spans {
                    parts.push(BAR);
                    parts.push(s.unwrap_or(DASH));
                }
                return out.emit_parts(&o, &parts);
            }
            b'L' => {
                let valid = r.span_parts(&mut self.span_parts);
                self.list.clear();
                self.list.push(if valid { self.one } else { self.zero });
                for p in &self.span_parts {
                    self.list.push(self.bar);
                    self.list.push(if *p == Part::EMPTY { self.dash } else { *p });
                }
                return out.emit_part_list(&o, &self.list);
            }
            _ => {}
        }
        self.out.clear();
        self.out.push(if r.valid() { b'1' } else { b'0' });
        for j in 0..self.spans.len() {
            self.out.push(b'|');
            self.out.extend_from_slice(r.field(j).unwrap_or(b"-"));
        }
        for j in self.spans.len()..self.spans.len() + self.numbers.len() {
            self.out.push(b'|');
            match r.number(j) {
                Some(x) if x == f64::INFINITY => self.out.extend_from_slice(b"+Inf"),
                Some(x) if x == f64::NEG_INFINITY => self.out.extend_from_slice(b"-Inf"),
                Some(x) => self.out.extend_from_slice(format!("{}", x).as_bytes()),
                None => self.out.push(b'-'),
            }
        }
        // spans must give what valid and field gave; a number path is no
        // span, and a span path no number.
        let mut spans = vec![None; self.spans.len()];
        if r.spans(&mut spans) != r.valid() {
            return Err("rustfields: spans and valid disagree".into());
        }
        for (j, s) in spans.iter().enumerate() {
            if *s != r.field(j) || r.number(j).is_some() {
                return Err(format!("rustfields: path {}: spans, field and number disagree", j).into());
            }
        }
        if r.field(self.spans.len()).is_some() {
            return Err("rustfields: field gives a path past the span paths".into());
        }
        out.emit(&Record { value: &self.out, ..o })
    }
}

#[cfg(not(co))]
mod one {
    use super::*;
    use eddy::Operator;

    impl Operator for Guest {
        fn open(config: &[u8]) -> Result<Guest> {
            open(config)
        }
        fn process(&mut self, r: &Record<'_>, out: &mut Emitter) -> Result {
            self.echo(r, false, out)
        }
    }

    eddy::operator!(Guest, fields);
}

#[cfg(co)]
mod two {
    use super::*;
    use eddy::{Context, Declare, KeyedCoOperator, RIGHT};

    impl KeyedCoOperator for Guest {
        fn open(config: &[u8], _states: &mut Declare) -> Result<Guest> {
            open(config)
        }
        fn process(&mut self, input: usize, r: &Record<'_>, ctx: &mut Context) -> Result {
            self.echo(r, input == RIGHT, ctx)
        }
    }

    eddy::keyed_co_operator!(Guest, fields);
}
