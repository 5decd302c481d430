// counter.ts - the "counter" example operator in AssemblyScript: a running
// count of records per key in keyed state, and with idle_ms a report of the
// keys that went quiet, on processing-time timers. It mirrors
// udfs/counter/counting, which documents the configuration, the output and
// the state encoding (and udfs/counter/c/counter.c); change them together.
// Build: see udfs/Makefile.
import { Buffer, NO_TIMESTAMP, Record, emitBuffer, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import {
  ABSENT, ERROR, KeyedOperator, PROCESSING_TIME, Timer, ValueState, deleteTimer, processingTime, registerTimer,
} from "../../../sdk/assemblyscript/assembly/keyed";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/keyed";

const MAX_IDLE_MS: f64 = 9007199254740992.0; // 2^53
const IDLE_MS = new json.Name("idle_ms");

// Set by readU64: whether the state held a value.
let had = false;

class Counter extends KeyedOperator {
  count: ValueState | null = null;
  idle: ValueState | null = null; // with idle_ms: the key's deadline
  idleMs: i64 = 0;
  scratch: usize = heap.alloc(8);
  out: Buffer = new Buffer();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    if (!it.objects(config, len)) return fail("counter: config is not a JSON object");
    for (;;) {
      const st = it.next();
      if (st == json.END) break;
      if (st == json.MALFORMED) return fail("counter: config is not valid JSON");
      if (!it.key.equals(IDLE_MS)) return fail("counter: config: unknown key " + it.key.toString());
      if (this.idleMs != 0) return fail("counter: config: repeated key idle_ms");
      const d = json.number(it.value.ptr, it.value.len);
      if (!json.numberOk || d != Math.trunc(d) || d < 1 || d > MAX_IDLE_MS) {
        return fail("counter: config: idle_ms must be a whole number of milliseconds from 1 to 2^53");
      }
      this.idleMs = <i64>d;
    }
    const count = new ValueState("count");
    this.count = count;
    if (count.id < 0) return false;
    if (this.idleMs > 0) {
      const idle = new ValueState("idle");
      this.idle = idle;
      if (idle.id < 0) return false;
    }
    return true;
  }

  // readU64 reads a stored count or deadline (0 and had false when absent;
  // false after fail).
  readU64(s: ValueState, n: usize): bool {
    const len = s.read();
    had = false;
    store<u64>(n, 0);
    if (len == ERROR) return false;
    if (len == ABSENT) return true;
    if (len != 8) return fail("counter: the stored count has " + len.toString() + " bytes, want 8");
    store<u64>(n, load<u64>(s.data)); // little endian, as Wasm is
    had = true;
    return true;
  }

  emitCount(keyPtr: usize, keyLen: u32, n: u64, idle: bool, ts: i64): bool {
    const out = this.out.reset();
    out.appendString('{"key":').appendQuoted(keyPtr, keyLen).appendString(',"count":').appendUint(n);
    if (idle) out.appendString(',"idle":true');
    out.byte(0x7d);
    return emitBuffer(keyPtr, keyLen, out, ts);
  }

  process(r: Record): bool {
    const count = changetype<ValueState>(this.count);
    if (!this.readU64(count, this.scratch)) return false;
    const n = load<u64>(this.scratch) + 1;
    store<u64>(this.scratch, n);
    if (!count.put(this.scratch, 8)) return false;
    if (this.idle != null && !this.touch()) return false;
    return this.emitCount(r.keyPtr, r.keyLen, n, false, r.timestamp);
  }

  // touch moves the key's idle timer to now + idle_ms.
  touch(): bool {
    const idle = changetype<ValueState>(this.idle);
    const now = processingTime();
    const deadline = now > i64.MAX_VALUE - this.idleMs ? i64.MAX_VALUE : now + this.idleMs;
    if (!this.readU64(idle, this.scratch)) return false;
    const prev = load<i64>(this.scratch);
    if (had) {
      if (prev == deadline) return true;
      if (!deleteTimer(PROCESSING_TIME, prev)) return false;
    }
    if (!registerTimer(PROCESSING_TIME, deadline)) return false;
    store<i64>(this.scratch, deadline);
    return idle.put(this.scratch, 8);
  }

  // Reports the key idle when the timer of its last record fires.
  onTimer(t: Timer): bool {
    if (this.idle == null || t.kind != PROCESSING_TIME) return true;
    const idle = changetype<ValueState>(this.idle);
    if (!this.readU64(idle, this.scratch)) return false;
    if (!had || load<i64>(this.scratch) != t.timestamp) return true;
    if (!this.readU64(changetype<ValueState>(this.count), this.scratch)) return false;
    const n = load<u64>(this.scratch);
    if (!idle.clear()) return false;
    return this.emitCount(t.keyPtr, t.keyLen, n, true, NO_TIMESTAMP);
  }
}

register(new Counter());
