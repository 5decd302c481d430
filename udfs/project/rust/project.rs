//! The "project" example operator in Rust: a JSON field projector and
//! filter. It mirrors udfs/project/projection/projection.go, which
//! documents the configuration and the exact rules; change both together.

use eddy::json::{self, Kind, Step};
use eddy::{Emitter, Error, Operator, Record, Result};

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
}

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
        let x = match json::number(v) {
            Some(x) => x,
            None => return false,
        };
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
        };
        let mut it = json::objects(config).ok_or("project: config is not a JSON object")?;
        let (mut seen_fields, mut seen_where) = (false, false);
        loop {
            match it.next_step() {
                Step::Malformed => return Err("project: config is not valid JSON".into()),
                Step::End => return Ok(p),
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
    }

    fn process(&mut self, r: &Record<'_>, out: &mut Emitter) -> Result {
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

eddy::operator!(Project);
