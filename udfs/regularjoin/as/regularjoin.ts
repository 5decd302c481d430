// regularjoin.ts - the "regular-join" example operator in AssemblyScript: a
// two-input keyed operator (KeyedCoOperator, ABI version 5), the
// unwindowed inner join of Nexmark q3. It mirrors udfs/regularjoin/go,
// which documents the configuration and the output, and
// udfs/regularjoin/c/regularjoin.c (whose config messages and key
// escaping it follows); change them together. Build: see udfs/Makefile.
import { Buffer, Record, emitBuffer, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import { ERROR, ListState, Timer, EVENT_TIME, registerTimer } from "../../../sdk/assemblyscript/assembly/keyed";
import { KeyedCoOperator, LEFT } from "../../../sdk/assemblyscript/assembly/keyedco";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/keyedco";

const MAX_MS: f64 = 9007199254740992.0; // 2^53
const REPORT_AT = new json.Name("report_at");
const HEX = "0123456789abcdef";

class Join extends KeyedCoOperator {
  reportAt: i64 = 0;
  sides: ListState[] = []; // LEFT, RIGHT
  out: Buffer = new Buffer();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    if (!it.objects(config, len)) return fail("regular-join: config: not a JSON object");
    for (;;) {
      const st = it.next();
      if (st == json.END) break;
      if (st == json.MALFORMED) return fail("regular-join: config: not valid JSON");
      if (!it.key.equals(REPORT_AT)) continue;
      const d = json.number(it.value.ptr, it.value.len);
      if (!json.numberOk || d != Math.trunc(d) || d < 0 || d > MAX_MS) {
        return fail("regular-join: config: report_at must be a time in ms from 0 to 2^53");
      }
      this.reportAt = <i64>d;
    }
    const left = new ListState("left"), right = new ListState("right");
    this.sides = [left, right];
    return left.id >= 0 && right.id >= 0;
  }

  process2(side: i32, r: Record): bool {
    const mine = unchecked(this.sides[side]), other = unchecked(this.sides[1 - side]);
    const nm = mine.read();
    if (nm == ERROR) return false;
    const no = other.read();
    if (no == ERROR) return false;
    if (this.reportAt > 0 && nm == 0 && no == 0 && !registerTimer(EVENT_TIME, this.reportAt)) return false;
    const f = other.frames;
    while (f.nextElement()) {
      const ok = side == LEFT ? this.emitPair(r, r.valuePtr, r.valueLen, f.ptr, f.len) : this.emitPair(r, f.ptr, f.len, r.valuePtr, r.valueLen);
      if (!ok) return false;
    }
    return mine.add(r.valuePtr, r.valueLen);
  }

  // Emits {"left":l,"right":r} under the record's key.
  emitPair(rec: Record, l: usize, ll: u32, r: usize, rl: u32): bool {
    const out = this.out.reset();
    out.appendString("{\"left\":").append(l, ll).appendString(",\"right\":").append(r, rl).byte(0x7d);
    return emitBuffer(rec.keyPtr, rec.keyLen, out, rec.timestamp);
  }

  // The key's report: the records each input had; then its state is cleared.
  onTimer(t: Timer): bool {
    const nl = unchecked(this.sides[0]).read();
    if (nl == ERROR) return false;
    const nr = unchecked(this.sides[1]).read();
    if (nr == ERROR) return false;
    const out = this.out.reset();
    out.appendString("{\"key\":\"");
    for (let i: u32 = 0; i < t.keyLen; i++) {
      const c = load<u8>(t.keyPtr + i);
      if (c == 0x22 || c == 0x5c) {
        out.byte(0x5c).byte(c);
      } else if (c < 0x20) {
        out.appendString("\\u00").byte(<u8>HEX.charCodeAt(c >> 4)).byte(<u8>HEX.charCodeAt(c & 0xf));
      } else {
        out.byte(c);
      }
    }
    out.appendString("\",\"left\":").appendInt(nl).appendString(",\"right\":").appendInt(nr).byte(0x7d);
    if (!emitBuffer(t.keyPtr, t.keyLen, out, t.timestamp)) return false;
    return unchecked(this.sides[0]).clear() && unchecked(this.sides[1]).clear();
  }
}

register(new Join());
