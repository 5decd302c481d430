//! The "project" example operator in Rust: a JSON field projector and
//! filter. It mirrors udfs/project/projection/projection.go, which
//! documents the configuration and the exact rules; change both together.
//!
//! When the configuration names fields or a where clause, it declares them
//! as fields the host extracts (`eddy::fields`, ABI versions 6 and 7), as
//! udfs/project/go does, in projection.Declared's order: the "fields"
//! names, then the where field as the one number path when the clause
//! compares numbers, else as a span path if it is not one of the names.
//! It then filters on what the host found (the number already parsed)
//! and emits the output value as a list of parts (the record's spans and
//! the `{"name":` pieces made in open) that the host gathers, scanning
//! and copying nothing. With neither (or a name that is not UTF-8, which a
//! field list cannot hold) it scans each value itself.

use eddy::json::{self, Kind, Step};
use eddy::{fields, Emitter, Error, Operator, Part, Record, Result};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    None,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Exists,
}

struct Project {
    all: bool,                   // no "fields": keep the whole value
    fields: Vec<Vec<u8>>,        // field names, unescaped
    prefixes: Vec<Vec<u8>>,      // `"name":` for each field, as written out
    spans: Vec<Option<(usize, usize)>>, // scratch: each field's value in the record
    op: Op,
    wherefield: Vec<u8>,
    numeric: bool,
    number: f64,
    text: Vec<u8>,
    out: Vec<u8>,

    // With declared fields: what the host hands over, and the pieces of
    // the output value as Parts of memory the operator keeps.
    declared: bool,
    compare: bool,             // the where clause compares numbers: number path `nspans`
    where_span: Option<usize>, // else the where field's span path, if any
    span_parts: Vec<Part>,     // the current record's spans, one per span path
    first: Vec<Vec<u8>>,       // `{"name":`: the piece before the first field present
    next: Vec<Vec<u8>>,        // `,"name":`: before each further one
    first_parts: Vec<Part>,
    next_parts: Vec<Part>,
    list: Vec<Part>, // the output value's part list, reused
}

static CLOSING: &[u8] = b"}";
static EMPTY: &[u8] = b"{}";

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Project {
    fn parse_fields(&mut self, value: &[u8]) -> Result {
        const BAD: &str = "project: config: fields must be an array of strings";
        let mut it = json::elements(value).ok_or(BAD)?;
        self.all = false;
        loop {
            let elem = match it.next_step() {
                Step::End => return Ok(()),
                Step::Field(_, e) if json::kind_of(e) == Kind::String => e,
                _ => return Err(BAD.into()),
            };
            let name = json::unquote(elem);
            if self.fields.contains(&name) {
                return Err(format!("project: config: field {} is listed twice", lossy(elem)).into());
            }
            let mut prefix = Vec::new();
            json::quote_into(&mut prefix, &name);
            prefix.push(b':');
            self.fields.push(name);
            self.prefixes.push(prefix);
            self.spans.push(None);
        }
    }

    fn parse_where(&mut self, value: &[u8]) -> Result {
        const BAD: &str = "project: config: where must be an object";
        let mut it = json::objects(value).ok_or(BAD)?;
        let (mut field, mut op, mut operand): (Option<&[u8]>, Option<&[u8]>, Option<&[u8]>) = (None, None, None);
        loop {
            match it.next_step() {
                Step::Malformed => return Err(BAD.into()),
                Step::End => break,
                Step::Field(k, v) => {
                    if json::equal(k, b"field") && field.is_none() {
                        field = Some(v);
                    } else if json::equal(k, b"op") && op.is_none() {
                        op = Some(v);
                    } else if json::equal(k, b"value") && operand.is_none() {
                        operand = Some(v);
                    } else {
                        return Err(format!("project: config: where: unknown or repeated key {}", lossy(k)).into());
                    }
                }
            }
        }
        let field = field.unwrap_or(b"");
        if json::kind_of(field) != Kind::String {
            return Err("project: config: where.field must be a string".into());
        }
        self.wherefield = json::unquote(field);
        let op = op.unwrap_or(b"");
        if json::kind_of(op) != Kind::String {
            return Err("project: config: where.op must be a string".into());
        }
        self.op = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            ("<=", Op::Le),
            (">", Op::Gt),
            (">=", Op::Ge),
            ("exists", Op::Exists),
        ]
        .iter()
        .find(|(s, _)| json::equal(op, s.as_bytes()))
        .map(|&(_, o)| o)
        .ok_or_else(|| {
            Error::new(format!(
                "project: config: where.op {} is not one of ==, !=, <, <=, >, >=, exists",
                lossy(op)
            ))
        })?;
        if self.op == Op::Exists {
            if operand.is_some() {
                return Err("project: config: where.value is not allowed with exists".into());
            }
            return Ok(());
        }
        let operand = operand.unwrap_or(b"");
        match json::kind_of(operand) {
            Kind::Number => {
                self.numeric = true;
                self.number = json::number(operand).unwrap_or(0.0);
                Ok(())
            }
            Kind::String => {
                if self.op != Op::Eq && self.op != Op::Ne {
                    return Err("project: config: strings compare only with == and !=".into());
                }
                self.text = json::unquote(operand);
                Ok(())
            }
            _ => Err("project: config: where.value must be a number or a string".into()),
        }
    }

    // Evaluates the where clause on the where field's raw value.
    fn matches(&self, v: Option<&[u8]>) -> bool {
        let v = match v {
            Some(v) => v,
            None => return false,
        };
        if self.op == Op::Exists {
            return true;
        }
        if !self.numeric {
            return json::kind_of(v) == Kind::String && json::equal(v, &self.text) == (self.op == Op::Eq);
        }
        if json::kind_of(v) != Kind::Number {
            return false;
        }
        match json::number(v) {
            Some(x) => self.compare_number(x),
            None => false,
        }
    }

    // Evaluates a where clause that compares numbers; NaN (no number)
    // never passes.
    fn compare_number(&self, x: f64) -> bool {
        if x.is_nan() {
            return false;
        }
        let n = self.number;
        match self.op {
            Op::Eq => x == n,
            Op::Ne => x != n,
            Op::Lt => x < n,
            Op::Le => x <= n,
            Op::Gt => x > n,
            Op::Ge => x >= n,
            _ => false,
        }
    }
}

impl Operator for Project {
    fn open(config: &[u8]) -> Result<Project> {
        let mut p = Project {
            all: true,
            fields: Vec::new(),
            prefixes: Vec::new(),
            spans: Vec::new(),
            op: Op::None,
            wherefield: Vec::new(),
            numeric: false,
            number: 0.0,
            text: Vec::new(),
            out: Vec::new(),
            declared: false,
            compare: false,
            where_span: None,
            span_parts: Vec::new(),
            first: Vec::new(),
            next: Vec::new(),
            first_parts: Vec::new(),
            next_parts: Vec::new(),
            list: Vec::new(),
        };
        let mut it = json::objects(config).ok_or("project: config is not a JSON object")?;
        let (mut seen_fields, mut seen_where) = (false, false);
        loop {
            match it.next_step() {
                Step::Malformed => return Err("project: config is not valid JSON".into()),
                Step::End => break,
                Step::Field(k, v) => {
                    if json::equal(k, b"fields") && !seen_fields {
                        seen_fields = true;
                        p.parse_fields(v)?;
                    } else if json::equal(k, b"where") && !seen_where {
                        seen_where = true;
                        p.parse_where(v)?;
                    } else {
                        return Err(format!("project: config: unknown or repeated key {}", lossy(k)).into());
                    }
                }
            }
        }
        p.declare()?;
        Ok(p)
    }

    fn process(&mut self, r: &Record<'_>, out: &mut Emitter) -> Result {
        if self.declared {
            return self.process_fields(r, out);
        }
        let value = r.value;
        let mut it = match json::objects(value) {
            Some(it) => it,
            None => return Ok(()),
        };
        for s in self.spans.iter_mut() {
            *s = None;
        }
        let base = value.as_ptr() as usize;
        let mut cond: Option<&[u8]> = None;
        loop {
            match it.next_step() {
                Step::Malformed => return Ok(()),
                Step::End => break,
                Step::Field(k, v) => {
                    if self.op != Op::None && cond.is_none() && json::equal(k, &self.wherefield) {
                        cond = Some(v);
                    }
                    for (i, f) in self.fields.iter().enumerate() {
                        if self.spans[i].is_none() && json::equal(k, f) {
                            self.spans[i] = Some((v.as_ptr() as usize - base, v.len()));
                            break; // field names are distinct: no other can match
                        }
                    }
                }
            }
        }
        if self.op != Op::None && !self.matches(cond) {
            return Ok(());
        }
        if self.all {
            return out.emit(r);
        }
        self.out.clear();
        self.out.push(b'{');
        let mut n = 0;
        for (i, s) in self.spans.iter().enumerate() {
            if let Some((at, len)) = *s {
                if n > 0 {
                    self.out.push(b',');
                }
                self.out.extend_from_slice(&self.prefixes[i]);
                self.out.extend_from_slice(&value[at..at + len]);
                n += 1;
            }
        }
        self.out.push(b'}');
        out.emit(&Record { value: &self.out, ..*r })
    }
}

impl Project {
    /// Declares the paths projection.Declared gives, unless there are none
    /// or a name is not UTF-8: then process scans.
    fn declare(&mut self) -> Result {
        let numeric_where = self.numeric && self.op != Op::None && self.op != Op::Exists;
        let where_at = self.fields.iter().position(|f| *f == self.wherefield).filter(|_| self.op != Op::None);
        let mut names: Vec<&[u8]> = self.fields.iter().map(|f| &f[..]).collect();
        let mut numbers: Vec<&[u8]> = Vec::new();
        if numeric_where {
            numbers.push(&self.wherefield);
        } else if self.op != Op::None && where_at.is_none() {
            names.push(&self.wherefield);
        }
        if names.is_empty() && numbers.is_empty() {
            return Ok(());
        }
        let utf8 = |v: &[&[u8]]| -> Option<Vec<[String; 1]>> {
            v.iter().map(|n| std::str::from_utf8(n).ok().map(|s| [s.to_string()])).collect()
        };
        let (spans, nums) = match (utf8(&names), utf8(&numbers)) {
            (Some(s), Some(n)) => (s, n),
            _ => return Ok(()), // a field list holds UTF-8 only: scan
        };
        fields::declare_with_numbers(&spans, &nums)?;
        self.declared = true;
        self.compare = numeric_where;
        self.where_span = if self.op == Op::None || numeric_where { None } else { Some(where_at.unwrap_or(self.fields.len())) };
        self.span_parts = vec![Part::EMPTY; spans.len()];
        for prefix in &self.prefixes {
            let mut f = vec![b'{'];
            f.extend_from_slice(prefix);
            let mut n = vec![b','];
            n.extend_from_slice(prefix);
            self.first.push(f);
            self.next.push(n);
        }
        // The pieces' bytes stay where they are for the operator's life.
        self.first_parts = self.first.iter().map(|b| Part::of(b)).collect();
        self.next_parts = self.next.iter().map(|b| Part::of(b)).collect();
        self.list = Vec::with_capacity(2 * self.fields.len() + 1);
        Ok(())
    }

    /// process with the fields the host found: ApplyParts.
    fn process_fields(&mut self, r: &Record<'_>, out: &mut Emitter) -> Result {
        if !r.span_parts(&mut self.span_parts) {
            return Ok(()); // not a JSON object
        }
        let keep = if self.compare {
            self.compare_number(r.number(self.span_parts.len()).unwrap_or(f64::NAN))
        } else {
            match self.where_span {
                Some(w) => self.matches(r.field(w)),
                None => true,
            }
        };
        if !keep {
            return Ok(());
        }
        self.list.clear();
        if self.all {
            self.list.push(Part::of(r.value));
        } else {
            let mut prefix = &self.first_parts;
            for (i, s) in self.span_parts[..self.fields.len()].iter().enumerate() {
                if *s == Part::EMPTY {
                    continue;
                }
                self.list.push(prefix[i]);
                self.list.push(*s);
                prefix = &self.next_parts;
            }
            self.list.push(Part::of(if self.list.is_empty() { EMPTY } else { CLOSING }));
        }
        // Both kinds of part outlive the call, as emit_part_list needs: the
        // spans are the input batch's bytes, the pieces the operator's.
        out.emit_part_list(r, &self.list)
    }
}

eddy::operator!(Project, fields);
