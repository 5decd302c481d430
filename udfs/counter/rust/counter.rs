//! The "counter" example operator in Rust: a running count of records per
//! key in keyed state. It mirrors udfs/counter/counting, which documents
//! the output and the state encoding; change both together.

use eddy::json::{self, Step};
use eddy::{Codec, Context, Declare, Error, KeyedOperator, Record, Result, ValueState};

/// A key's count, stored as 8 bytes little endian, as in Go and C.
struct Count(u64);

impl Codec for Count {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Result<Count> {
        let mut x = [0u8; 8];
        if b.len() != 8 {
            return Err(Error::new(format!("counter: the stored count has {} bytes, want 8", b.len())));
        }
        x.copy_from_slice(b);
        Ok(Count(u64::from_le_bytes(x)))
    }
}

struct Counter {
    count: ValueState<Count>,
    out: Vec<u8>,
}

impl KeyedOperator for Counter {
    fn open(config: &[u8], states: &mut Declare) -> Result<Counter> {
        let mut it = json::objects(config).ok_or("counter: config is not a JSON object")?;
        match it.next_step() {
            Step::End => {}
            Step::Malformed => return Err("counter: config is not valid JSON".into()),
            Step::Field(key, _) => {
                return Err(format!("counter: config: unknown key {}", String::from_utf8_lossy(key)).into())
            }
        }
        Ok(Counter { count: states.value("count", 0), out: Vec::new() })
    }

    fn process(&mut self, r: &Record<'_>, ctx: &mut Context) -> Result {
        let n = self.count.get(ctx)?.map_or(0, |c| c.0) + 1;
        self.count.put(ctx, &Count(n));
        self.out.clear();
        self.out.extend_from_slice(b"{\"key\":");
        json::quote_into(&mut self.out, r.key);
        self.out.extend_from_slice(b",\"count\":");
        eddy::append_u64(&mut self.out, n);
        self.out.push(b'}');
        ctx.emit_kv(r.key, &self.out, r.timestamp)
    }
}

eddy::keyed_operator!(Counter);
