//! The "counter" example operator in Rust: a running count of records per
//! key in keyed state, and with idle_ms a report of the keys that went
//! quiet, on processing-time timers. It mirrors udfs/counter/counting,
//! which documents the configuration, the output and the state encoding;
//! change both together.

use eddy::json::{self, Step};
use eddy::{Codec, Context, Declare, Error, KeyedOperator, Record, Result, TimeDomain, Timer, ValueState, NO_TIMESTAMP};

const MAX_IDLE_MS: f64 = 9007199254740992.0; // 2^53

/// A key's count or idle deadline, stored as 8 bytes little endian, as in
/// Go and C.
struct U64(u64);

impl Codec for U64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Result<U64> {
        let mut x = [0u8; 8];
        if b.len() != 8 {
            return Err(Error::new(format!("counter: the stored count has {} bytes, want 8", b.len())));
        }
        x.copy_from_slice(b);
        Ok(U64(u64::from_le_bytes(x)))
    }
}

struct Counter {
    count: ValueState<U64>,
    /// With idle_ms: the key's deadline.
    idle: Option<ValueState<U64>>,
    idle_ms: i64,
    out: Vec<u8>,
    key: Vec<u8>,
}

impl Counter {
    fn emit_count(&mut self, ctx: &mut Context, n: u64, idle: bool, timestamp: i64) -> Result {
        self.out.clear();
        self.out.extend_from_slice(b"{\"key\":");
        json::quote_into(&mut self.out, &self.key);
        self.out.extend_from_slice(b",\"count\":");
        eddy::append_u64(&mut self.out, n);
        if idle {
            self.out.extend_from_slice(b",\"idle\":true");
        }
        self.out.push(b'}');
        ctx.emit_kv(&self.key, &self.out, timestamp)
    }
}

impl KeyedOperator for Counter {
    fn open(config: &[u8], states: &mut Declare) -> Result<Counter> {
        let mut it = json::objects(config).ok_or("counter: config is not a JSON object")?;
        let mut idle_ms = 0i64;
        loop {
            match it.next_step() {
                Step::End => break,
                Step::Malformed => return Err("counter: config is not valid JSON".into()),
                Step::Field(key, value) => {
                    if !json::equal(key, b"idle_ms") {
                        return Err(format!("counter: config: unknown key {}", String::from_utf8_lossy(key)).into());
                    }
                    if idle_ms != 0 {
                        return Err("counter: config: repeated key idle_ms".into());
                    }
                    match json::number(value) {
                        Some(d) if d == d.trunc() && d >= 1.0 && d <= MAX_IDLE_MS => idle_ms = d as i64,
                        _ => {
                            return Err("counter: config: idle_ms must be a whole number of milliseconds from 1 to 2^53".into())
                        }
                    }
                }
            }
        }
        let count = states.value("count", 0);
        let idle = if idle_ms > 0 { Some(states.value("idle", 0)) } else { None };
        Ok(Counter { count, idle, idle_ms, out: Vec::new(), key: Vec::new() })
    }

    fn process(&mut self, r: &Record<'_>, ctx: &mut Context) -> Result {
        let n = self.count.get(ctx)?.map_or(0, |c| c.0) + 1;
        self.count.put(ctx, &U64(n));
        if let Some(idle) = &self.idle {
            // Moves the key's idle timer to now + idle_ms.
            let deadline = ctx.processing_time().checked_add(self.idle_ms).unwrap_or(i64::MAX);
            let prev = idle.get(ctx)?;
            if prev.as_ref().map_or(true, |p| p.0 as i64 != deadline) {
                if let Some(p) = prev {
                    ctx.delete_timer(TimeDomain::ProcessingTime, p.0 as i64);
                }
                ctx.register_timer(TimeDomain::ProcessingTime, deadline);
                idle.put(ctx, &U64(deadline as u64));
            }
        }
        self.key.clear();
        self.key.extend_from_slice(r.key);
        self.emit_count(ctx, n, false, r.timestamp)
    }

    // Reports the key idle when the timer of its last record fires.
    fn on_timer(&mut self, t: &Timer, ctx: &mut Context) -> Result {
        let idle = match &self.idle {
            Some(idle) if t.domain == TimeDomain::ProcessingTime => idle,
            _ => return Ok(()),
        };
        match idle.get(ctx)? {
            Some(d) if d.0 as i64 == t.timestamp => {}
            _ => return Ok(()),
        }
        let n = self.count.get(ctx)?.map_or(0, |c| c.0);
        idle.clear(ctx);
        self.key.clear();
        self.key.extend_from_slice(ctx.key());
        self.emit_count(ctx, n, true, NO_TIMESTAMP)
    }
}

eddy::keyed_operator!(Counter);
