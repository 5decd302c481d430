//! A small keyed operator built with the Rust SDK for rust_test.go: its
//! behaviour is chosen by each record's value, so that one module covers
//! the SDK's failures, panics and state kinds through the real host.
//!
//!   panic   panics (the panic hook must turn it into the task's error)
//!   unwrap  unwraps a None (a panic raised inside std)
//!   fail    returns an Err
//!   parts   emits a value in parts, which its version (4) does not have
//!   other   appends the value to a list state, counts it in a map state,
//!           stores it in a value state of schema 1, and emits
//!           "<list length>,<map entries>,<previous value's schema>,<watermark>"
//!           and sets a processing-time timer at the record's timestamp
//!
//! A timer emits "timer:<domain>:<time>:<the key's last value>"; close emits
//! "closed:<records processed>".

use eddy::{Context, Declare, Emitter, KeyedOperator, ListState, MapState, Record, Result, TimeDomain, Timer, ValueState};

struct Guest {
    seen: ListState<Vec<u8>>,
    counts: MapState<Vec<u8>, u64>,
    last: ValueState<Vec<u8>>,
    processed: u64,
}

impl KeyedOperator for Guest {
    fn open(_config: &[u8], states: &mut Declare) -> Result<Guest> {
        Ok(Guest {
            seen: states.list("seen", 0),
            counts: states.map("counts", 0),
            last: states.value_with_schema("last", 0, 1),
            processed: 0,
        })
    }

    fn process(&mut self, r: &Record<'_>, ctx: &mut Context) -> Result {
        match r.value {
            b"panic" => panic!("rustguest: the record asked for a panic"),
            b"unwrap" => {
                let none: Option<u8> = None;
                none.unwrap();
                Ok(())
            }
            b"fail" => Err("rustguest: refusing the record \"fail\"".into()),
            b"parts" => ctx.emit_parts(r, &[r.value]),
            v => {
                self.processed += 1;
                ctx.register_timer(TimeDomain::ProcessingTime, r.timestamp);
                let v = v.to_vec();
                self.seen.append(ctx, &v);
                let n = self.counts.get(ctx, &v)?.unwrap_or(0);
                self.counts.put(ctx, &v, &(n + 1));
                let schema = self.last.get_with_schema(ctx).map_or(-1, |(_, s)| s as i64);
                self.last.put(ctx, &v);
                let out = format!(
                    "{},{},{},{}",
                    self.seen.get(ctx)?.len(),
                    self.counts.entries(ctx)?.len(),
                    schema,
                    ctx.watermark()
                );
                ctx.emit_kv(r.key, out.as_bytes(), r.timestamp)
            }
        }
    }

    fn on_timer(&mut self, t: &Timer, ctx: &mut Context) -> Result {
        let last = self.last.get(ctx)?.unwrap_or_default();
        let out = format!("timer:{:?}:{}:{}", t.domain, t.timestamp, String::from_utf8_lossy(&last));
        let key = ctx.key().to_vec();
        ctx.emit_kv(&key, out.as_bytes(), t.timestamp)
    }

    fn close(&mut self, out: &mut Emitter) -> Result {
        out.emit_kv(b"", format!("closed:{}", self.processed).as_bytes(), eddy::NO_TIMESTAMP)
    }
}

eddy::keyed_operator!(Guest, schema);
