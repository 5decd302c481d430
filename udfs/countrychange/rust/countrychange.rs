//! The "country-change" example operator in Rust: a card-fraud rule that
//! alerts when a card is used in two countries within a window of event
//! time. It mirrors udfs/countrychange/detector, which documents the
//! configuration, the rules and the state encoding; change both together.

use eddy::json::{self, Kind, Step};
use eddy::{Codec, Context, Declare, Error, KeyedOperator, Record, Result, TimeDomain, Timer, ValueState, NO_TIMESTAMP};

const DEFAULT_WINDOW_MS: i64 = 300_000;
const MAX_WINDOW_MS: f64 = 9007199254740992.0; // 2^53

/// A card's last transaction: its time (8 bytes, little endian) and its
/// country, as in Go and C.
struct Last {
    ts: i64,
    country: Vec<u8>,
}

impl Codec for Last {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.ts.to_le_bytes());
        out.extend_from_slice(&self.country);
    }
    fn decode(b: &[u8]) -> Result<Last> {
        if b.len() < 8 {
            return Err(Error::new(format!(
                "country-change: the stored state has {} bytes, want at least 8",
                b.len()
            )));
        }
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[..8]);
        Ok(Last { ts: i64::from_le_bytes(x), country: b[8..].to_vec() })
    }
}

struct CountryChange {
    window_ms: i64,
    last: ValueState<Last>,
    out: Vec<u8>,
}

impl CountryChange {
    // When the cleanup timer of a transaction at ts fires.
    fn timer_for(&self, ts: i64) -> i64 {
        ts.checked_add(self.window_ms).unwrap_or(i64::MAX)
    }
}

impl KeyedOperator for CountryChange {
    fn open(config: &[u8], states: &mut Declare) -> Result<CountryChange> {
        let mut it = json::objects(config).ok_or("country-change: config is not a JSON object")?;
        let mut window_ms = DEFAULT_WINDOW_MS;
        let mut seen = false;
        loop {
            match it.next_step() {
                Step::Malformed => return Err("country-change: config is not valid JSON".into()),
                Step::End => break,
                Step::Field(k, v) => {
                    if !json::equal(k, b"window_ms") || seen {
                        return Err(format!(
                            "country-change: config: unknown or repeated key {}",
                            String::from_utf8_lossy(k)
                        )
                        .into());
                    }
                    seen = true;
                    match json::number(v) {
                        Some(d) if d == d.trunc() && d >= 1.0 && d <= MAX_WINDOW_MS => window_ms = d as i64,
                        _ => {
                            return Err("country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53".into())
                        }
                    }
                }
            }
        }
        Ok(CountryChange { window_ms, last: states.value("last", 0), out: Vec::new() })
    }

    fn process(&mut self, r: &Record<'_>, ctx: &mut Context) -> Result {
        let ts = r.timestamp;
        if ts == NO_TIMESTAMP {
            return Ok(());
        }
        let card = match json::field(r.value, b"card") {
            Some(v) if json::kind_of(v) == Kind::String => json::unquote(v),
            _ => return Ok(()),
        };
        let country = match json::field(r.value, b"country") {
            Some(v) if json::kind_of(v) == Kind::String => json::unquote(v),
            _ => return Ok(()),
        };
        let last = self.last.get(ctx)?;
        let mut later = true;
        if let Some(l) = &last {
            // In u64 the difference cannot overflow.
            let mut gap = (ts as u64).wrapping_sub(l.ts as u64);
            if ts < l.ts {
                gap = (l.ts as u64).wrapping_sub(ts as u64);
                later = false;
            }
            if gap <= self.window_ms as u64 && country != l.country {
                let (from, to) = if later { (&l.country, &country) } else { (&country, &l.country) };
                let o = &mut self.out;
                o.clear();
                o.extend_from_slice(b"{\"card\":");
                json::quote_into(o, &card);
                o.extend_from_slice(b",\"from\":");
                json::quote_into(o, from);
                o.extend_from_slice(b",\"to\":");
                json::quote_into(o, to);
                o.extend_from_slice(b",\"gap_ms\":");
                eddy::append_i64(o, gap as i64);
                o.extend_from_slice(b",\"ts\":");
                eddy::append_i64(o, ts);
                o.push(b'}');
                ctx.emit_kv(r.key, &self.out, ts)?;
            }
        }
        if !later {
            return Ok(());
        }
        self.last.put(ctx, &Last { ts, country });
        if let Some(l) = &last {
            ctx.delete_timer(TimeDomain::EventTime, self.timer_for(l.ts));
        }
        ctx.register_timer(TimeDomain::EventTime, self.timer_for(ts));
        Ok(())
    }

    // Clears the card's state when its cleanup timer fires, unless a later
    // transaction has replaced the one that set the timer.
    fn on_timer(&mut self, t: &Timer, ctx: &mut Context) -> Result {
        if let Some(l) = self.last.get(ctx)? {
            if self.timer_for(l.ts) <= t.timestamp {
                self.last.clear(ctx);
            }
        }
        Ok(())
    }
}

eddy::keyed_operator!(CountryChange);
