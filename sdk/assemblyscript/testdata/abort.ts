// abort.ts - a hostile operator for the tests: it hits AssemblyScript's
// abort in the ways an author's bug does, chosen by the first byte of
// each record's value: 'a' a failed assert, 'i' a read of an index out of range (a write grows the array, as in JavaScript),
// 't' a throw, anything else passes the record on. Built by udfs/Makefile
// into udfs/build/abort-as.wasm; udfs/ashostile_test.go runs it through
// the real host.
import { Operator, Record, emitRecord, register } from "../assembly/eddy";
export * from "../assembly/exports/operator";

class Abort extends Operator {
  items: i32[] = [1, 2, 3];

  process(r: Record): bool {
    const c = r.valueLen > 0 ? load<u8>(r.valuePtr) : 0;
    if (c == 0x61) assert(r.valueLen > 100, "the value is too short");
    if (c == 0x69 && this.items[<i32>r.valueLen + 10] == 7) return false;
    if (c == 0x74) throw new Error("thrown by the operator");
    return emitRecord(r);
  }
}

register(new Abort());
