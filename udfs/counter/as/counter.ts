// counter.ts - the "counter" example operator in AssemblyScript: a running
// count of records per key in keyed state. It mirrors udfs/counter/counting,
// which documents the output and the state encoding (and
// udfs/counter/c/counter.c); change them together. Build: see udfs/Makefile.
import { Buffer, Record, emitBuffer, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import { ABSENT, ERROR, KeyedOperator, ValueState } from "../../../sdk/assemblyscript/assembly/keyed";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/keyed";

class Counter extends KeyedOperator {
  count: ValueState | null = null;
  scratch: usize = heap.alloc(8);
  out: Buffer = new Buffer();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    if (!it.objects(config, len)) return fail("counter: config is not a JSON object");
    const st = it.next();
    if (st == json.MALFORMED) return fail("counter: config is not valid JSON");
    if (st != json.END) return fail("counter: config: unknown key " + it.key.toString());
    const count = new ValueState("count");
    this.count = count;
    return count.id >= 0;
  }

  process(r: Record): bool {
    const count = changetype<ValueState>(this.count);
    let n: u64 = 0;
    const len = count.read();
    if (len == ERROR) return false;
    if (len != ABSENT) {
      if (len != 8) return fail("counter: the stored count has " + len.toString() + " bytes, want 8");
      n = load<u64>(count.data); // little endian, as Wasm is
    }
    n++;
    store<u64>(this.scratch, n);
    if (!count.put(this.scratch, 8)) return false;
    const out = this.out.reset();
    out.appendString('{"key":').appendQuoted(r.keyPtr, r.keyLen).appendString(',"count":').appendUint(n).byte(0x7d);
    return emitBuffer(r.keyPtr, r.keyLen, out, r.timestamp);
  }
}

register(new Counter());
