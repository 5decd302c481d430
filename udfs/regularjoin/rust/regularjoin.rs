//! The "regular-join" example operator in Rust: a two-input keyed operator
//! (`eddy::keyed_co_operator!`, ABI version 5), the unwindowed inner join
//! of Nexmark q3. It mirrors udfs/regularjoin/go, which documents the
//! configuration and the output, and udfs/regularjoin/c, whose config
//! checks and report it follows byte for byte; change them together.

use eddy::json::{self, Step};
use eddy::{Context, Declare, KeyedCoOperator, ListState, Record, Result, TimeDomain, Timer, LEFT, RIGHT};

const MAX_MS: f64 = 9007199254740992.0; // 2^53

struct Join {
    report_at: i64,
    sides: [ListState<Vec<u8>>; 2], // LEFT, RIGHT
    out: Vec<u8>,
}

impl KeyedCoOperator for Join {
    fn open(config: &[u8], states: &mut Declare) -> Result<Join> {
        let mut it = json::objects(config).ok_or("regular-join: config: not a JSON object")?;
        let mut report_at = 0;
        loop {
            match it.next_step() {
                Step::End => break,
                Step::Malformed => return Err("regular-join: config: not valid JSON".into()),
                Step::Field(k, v) => {
                    if !json::equal(k, b"report_at") {
                        continue;
                    }
                    match json::number(v) {
                        Some(d) if d == d.trunc() && (0.0..=MAX_MS).contains(&d) => report_at = d as i64,
                        _ => return Err("regular-join: config: report_at must be a time in ms from 0 to 2^53".into()),
                    }
                }
            }
        }
        Ok(Join { report_at, sides: [states.list("left", 0), states.list("right", 0)], out: Vec::new() })
    }

    fn process(&mut self, input: usize, r: &Record<'_>, ctx: &mut Context) -> Result {
        let mine = self.sides[input].get(ctx)?;
        let other = self.sides[1 - input].get(ctx)?;
        if self.report_at > 0 && mine.is_empty() && other.is_empty() {
            ctx.register_timer(TimeDomain::EventTime, self.report_at);
        }
        for o in &other {
            let (l, rt) = if input == LEFT { (r.value, &o[..]) } else { (&o[..], r.value) };
            self.out.clear();
            self.out.extend_from_slice(b"{\"left\":");
            self.out.extend_from_slice(l);
            self.out.extend_from_slice(b",\"right\":");
            self.out.extend_from_slice(rt);
            self.out.push(b'}');
            ctx.emit_kv(r.key, &self.out, r.timestamp)?;
        }
        self.sides[input].append(ctx, &r.value.to_vec());
        Ok(())
    }

    /// The key's report: the records each input had; then its state is
    /// cleared.
    fn on_timer(&mut self, t: &Timer, ctx: &mut Context) -> Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let nl = self.sides[LEFT].get(ctx)?.len();
        let nr = self.sides[RIGHT].get(ctx)?.len();
        let key = ctx.key().to_vec();
        self.out.clear();
        self.out.extend_from_slice(b"{\"key\":\"");
        for &c in &key {
            if c == b'"' || c == b'\\' {
                self.out.extend_from_slice(&[b'\\', c]);
            } else if c < 0x20 {
                self.out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
            } else {
                self.out.push(c);
            }
        }
        self.out.extend_from_slice(b"\",\"left\":");
        eddy::append_u64(&mut self.out, nl as u64);
        self.out.extend_from_slice(b",\"right\":");
        eddy::append_u64(&mut self.out, nr as u64);
        self.out.push(b'}');
        ctx.emit_kv(&key, &self.out, t.timestamp)?;
        self.sides[LEFT].clear(ctx);
        self.sides[RIGHT].clear(ctx);
        Ok(())
    }
}

eddy::keyed_co_operator!(Join);
