// surface.ts - a keyed operator that uses every kind of keyed state,
// schema versions and timers, for udfs/ashostile_test.go
// (TestAssemblyScriptSurface), which runs it through the real host with a
// real state store. Its behaviour is chosen by each record's value:
//
//   fail    fails the record
//   forget  deletes the map entry "x"
//   other   appends the value to a list state, counts it in a map state
//           (u64 little endian per user key), stores it in a value state
//           of schema 1, counts the key's records in a NumberState<i64>,
//           sets a processing-time timer at the record's timestamp and
//           emits "<list>|<map>|<previous value's schema>|<watermark>|<n>":
//           the list's elements joined by "+", the map's entries
//           "uk:count" joined by ";" in user-key order, -1 for no
//           previous value.
//
// A timer emits "timer:<kind>:<time>:<the key's last value>".
import { Buffer, Record, emitBuffer, fail, register } from "../assembly/eddy";
import {
  ABSENT, ERROR, KeyedOperator, ListState, MapState, NumberState, PROCESSING_TIME, Timer,
  currentWatermark, registerTimer,
} from "../assembly/keyed";
import { SchemaValueState } from "../assembly/schema";
export * from "../assembly/exports/schema";

const X = memory.data<u8>([0x78]); // "x"

class T extends KeyedOperator {
  last: SchemaValueState | null = null;
  seen: ListState | null = null;
  counts: MapState | null = null;
  n: NumberState<i64> | null = null;
  out: Buffer = new Buffer();
  scratch: usize = heap.alloc(8);

  open(c: usize, n: u32): bool {
    const last = new SchemaValueState("last", 1);
    const seen = new ListState("seen", 3600000);
    const counts = new MapState("counts");
    const nn = new NumberState<i64>("n");
    this.last = last; this.seen = seen; this.counts = counts; this.n = nn;
    return last.id >= 0 && seen.id >= 0 && counts.id >= 0 && nn.id >= 0;
  }

  process(r: Record): bool {
    const last = this.last!, seen = this.seen!, counts = this.counts!, nn = this.n!;
    const v = String.UTF8.decodeUnsafe(r.valuePtr, r.valueLen);
    if (v == "fail") return fail("asguest: refusing the record \"fail\"");
    if (v == "forget") return counts.delete(X, 1);
    if (!seen.add(r.valuePtr, r.valueLen)) return false;
    let c = counts.read(r.valuePtr, r.valueLen);
    if (c == ERROR) return false;
    let k: u64 = c == ABSENT ? 0 : load<u64>(counts.data);
    store<u64>(this.scratch, k + 1);
    if (!counts.put(r.valuePtr, r.valueLen, this.scratch, 8)) return false;
    const prev = last.read();
    if (prev == ERROR) return false;
    const schema: i64 = prev == ABSENT ? -1 : <i64>last.schema;
    if (!last.put(r.valuePtr, r.valueLen)) return false;
    const count = nn.get(0) + 1;
    if (nn.bad || !nn.set(count)) return false;
    if (!registerTimer(PROCESSING_TIME, r.timestamp)) return false;

    const out = this.out.reset();
    if (seen.read() == ERROR) return false;
    let first = true;
    while (seen.frames.nextElement()) {
      if (!first) out.byte(0x2b); // +
      out.append(seen.frames.ptr, seen.frames.len);
      first = false;
    }
    out.byte(0x7c); // |
    if (counts.entries() == ERROR) return false;
    first = true;
    while (counts.frames.nextEntry()) {
      if (!first) out.byte(0x3b); // ;
      out.append(counts.frames.keyPtr, counts.frames.keyLen).byte(0x3a).appendUint(load<u64>(counts.frames.ptr));
      first = false;
    }
    out.byte(0x7c).appendInt(schema).byte(0x7c).appendInt(currentWatermark()).byte(0x7c).appendInt(count);
    return emitBuffer(r.keyPtr, r.keyLen, out, r.timestamp);
  }

  onTimer(t: Timer): bool {
    const last = this.last!;
    const n = last.read();
    if (n == ERROR) return false;
    const out = this.out.reset();
    out.appendString("timer:").appendInt(t.kind).byte(0x3a).appendInt(t.timestamp).byte(0x3a);
    if (n != ABSENT) out.append(last.data, n);
    return emitBuffer(t.keyPtr, t.keyLen, out, t.timestamp);
  }
}
register(new T());
