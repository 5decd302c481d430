//! The "top-n" example window function in Rust: when a window fires, it
//! emits the window's n elements with the largest value of a numeric
//! field, best first. It mirrors udfs/topn/ranking, which documents the
//! configuration and the output; change both together.

use eddy::json::{self, Kind, Step};
use eddy::{Emitter, Record, Result, Window, WindowFunction};

const DEFAULT_N: usize = 3;
const MAX_N: f64 = 10000.0;

/// An element that counts: its number and its index in the window.
#[derive(Clone, Copy)]
struct Candidate {
    v: f64,
    i: usize,
}

/// The ranking's order, reversed: a ranks below b.
fn worse(a: Candidate, b: Candidate) -> bool {
    a.v < b.v || (a.v == b.v && a.i > b.i)
}

struct TopN {
    n: usize,
    field: Vec<u8>,
    heap: Vec<Candidate>, // a min-heap by the ranking, the worst on top
    out: Vec<u8>,
}

impl TopN {
    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if !worse(self.heap[i], self.heap[p]) {
                return;
            }
            self.heap.swap(i, p);
            i = p;
        }
    }

    fn down(&mut self, mut i: usize) {
        let h = &mut self.heap;
        loop {
            let (mut m, l, r) = (i, 2 * i + 1, 2 * i + 2);
            if l < h.len() && worse(h[l], h[m]) {
                m = l;
            }
            if r < h.len() && worse(h[r], h[m]) {
                m = r;
            }
            if m == i {
                return;
            }
            h.swap(i, m);
            i = m;
        }
    }
}

fn is_space(c: &u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

impl WindowFunction for TopN {
    fn open(config: &[u8]) -> Result<TopN> {
        let mut t = TopN { n: DEFAULT_N, field: b"amount".to_vec(), heap: Vec::new(), out: Vec::new() };
        let mut it = json::objects(config).ok_or("top-n: config is not a JSON object")?;
        let (mut seen_n, mut seen_field) = (false, false);
        loop {
            match it.next_step() {
                Step::Malformed => return Err("top-n: config is not valid JSON".into()),
                Step::End => return Ok(t),
                Step::Field(k, v) => {
                    if json::equal(k, b"n") && !seen_n {
                        seen_n = true;
                        match json::number(v) {
                            Some(d) if d == d.trunc() && d >= 1.0 && d <= MAX_N => t.n = d as usize,
                            _ => return Err("top-n: config: n must be a whole number from 1 to 10000".into()),
                        }
                    } else if json::equal(k, b"field") && !seen_field {
                        seen_field = true;
                        if json::kind_of(v) != Kind::String {
                            return Err("top-n: config: field must be a string".into());
                        }
                        t.field = json::unquote(v);
                    } else {
                        return Err(
                            format!("top-n: config: unknown or repeated key {}", String::from_utf8_lossy(k)).into()
                        );
                    }
                }
            }
        }
    }

    fn apply(&mut self, w: &Window<'_>, elems: &[Record<'_>], out: &mut Emitter) -> Result {
        self.heap.clear();
        for (i, e) in elems.iter().enumerate() {
            let v = match json::field(e.value, &self.field) {
                Some(f) if json::kind_of(f) == Kind::Number => match json::number(f) {
                    Some(v) => v,
                    None => continue,
                },
                _ => continue,
            };
            let c = Candidate { v, i };
            if self.heap.len() < self.n {
                self.heap.push(c);
                let last = self.heap.len() - 1;
                self.up(last);
            } else if worse(self.heap[0], c) {
                self.heap[0] = c;
                self.down(0);
            }
        }
        // Best first; never equal, since indices differ.
        self.heap.sort_unstable_by(|a, b| if worse(*b, *a) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
        for rank in 0..self.heap.len() {
            let mut v = elems[self.heap[rank].i].value;
            while let Some((c, rest)) = v.split_first() {
                if !is_space(c) {
                    break;
                }
                v = rest;
            }
            while let Some((c, rest)) = v.split_last() {
                if !is_space(c) {
                    break;
                }
                v = rest;
            }
            let o = &mut self.out;
            o.clear();
            o.extend_from_slice(b"{\"key\":");
            json::quote_into(o, w.key);
            o.extend_from_slice(b",\"window_start\":");
            eddy::append_i64(o, w.start);
            o.extend_from_slice(b",\"window_end\":");
            eddy::append_i64(o, w.end);
            o.extend_from_slice(b",\"rank\":");
            eddy::append_u64(o, rank as u64 + 1);
            o.extend_from_slice(b",\"value\":");
            o.extend_from_slice(v);
            o.push(b'}');
            out.emit_kv(w.key, &self.out, w.end - 1)?;
        }
        Ok(())
    }
}

eddy::window_function!(TopN);
