// surface.ts - uses every kind of keyed state, schema versions and timers,
// so that a build (make -C udfs build/surface-as.wasm) checks that the
// whole keyed surface of the SDK compiles and imports what ABI version 4
// allows: TestAssemblyScriptSurface loads it with the real host, which
// checks every import against the declared version; it does not run it.
import { Record, emitRecord, register } from "../assembly/eddy";
import { KeyedOperator, ListState, MapState, NumberState, registerTimer, EVENT_TIME, currentWatermark, processingTime, Timer } from "../assembly/keyed";
import { SchemaValueState } from "../assembly/schema";
export * from "../assembly/exports/schema";
class T extends KeyedOperator {
  s: SchemaValueState | null = null; l: ListState | null = null; m: MapState | null = null; n: NumberState<i64> | null = null;
  open(c: usize, n: u32): bool { this.s = new SchemaValueState("s", 1); this.l = new ListState("l", 1000); this.m = new MapState("m"); this.n = new NumberState<i64>("n"); return true; }
  process(r: Record): bool {
    const s = this.s!; s.read(); s.put(r.valuePtr, r.valueLen);
    const l = this.l!; l.add(r.valuePtr, r.valueLen); l.read(); while (l.frames.nextElement()) {}
    const m = this.m!; m.put(r.valuePtr, r.valueLen, r.valuePtr, r.valueLen); m.entries(); m.read(r.valuePtr, 1); m.delete(r.valuePtr, 1);
    const nn = this.n!; nn.set(nn.get(0) + 1);
    registerTimer(EVENT_TIME, currentWatermark() + processingTime());
    return emitRecord(r);
  }
  onTimer(t: Timer): bool { return true; }
}
register(new T());
