// topn.ts - the "top-n" example window function in AssemblyScript: when a
// window fires, it emits the window's n elements with the largest value of
// a numeric field, best first. It mirrors udfs/topn/ranking, which
// documents the configuration and the output (and udfs/topn/c/topn.c);
// change them together. Build: see udfs/Makefile.
import { Buffer, Record, emitBuffer, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import { Window, WindowFunction } from "../../../sdk/assemblyscript/assembly/window";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/window";

const DEFAULT_N: i32 = 3;
const MAX_N: i32 = 10000;

const N = new json.Name("n");
const FIELD = new json.Name("field");

// @ts-ignore: decorator
@inline function isSpace(c: u32): bool { return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d; }

class TopN extends WindowFunction {
  n: i32 = DEFAULT_N;
  field: json.Name = new json.Name("amount");
  // A min-heap by the ranking, the worst on top: values and indices.
  heapV: StaticArray<f64> = new StaticArray<f64>(0);
  heapI: StaticArray<i32> = new StaticArray<i32>(0);
  heapLen: i32 = 0;
  span: json.Span = new json.Span();
  out: Buffer = new Buffer();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    let seenN = false, seenField = false;
    if (!it.objects(config, len)) return fail("top-n: config is not a JSON object");
    for (;;) {
      const st = it.next();
      if (st == json.MALFORMED) return fail("top-n: config is not valid JSON");
      if (st == json.END) break;
      if (it.key.equals(N) && !seenN) {
        seenN = true;
        const d = json.number(it.value.ptr, it.value.len);
        if (!json.numberOk || d != Math.trunc(d) || d < 1 || d > <f64>MAX_N) {
          return fail("top-n: config: n must be a whole number from 1 to " + MAX_N.toString());
        }
        this.n = <i32>d;
      } else if (it.key.equals(FIELD) && !seenField) {
        seenField = true;
        if (it.value.kind() != json.STRING) return fail("top-n: config: field must be a string");
        this.field = json.unquoteName(it.value);
      } else {
        return fail("top-n: config: unknown or repeated key " + it.key.toString());
      }
    }
    this.heapV = new StaticArray<f64>(this.n);
    this.heapI = new StaticArray<i32>(this.n);
    return true;
  }

  // The ranking's order, reversed: a ranks below b.
  worse(a: i32, b: i32): bool {
    const av = unchecked(this.heapV[a]), bv = unchecked(this.heapV[b]);
    return av < bv || (av == bv && unchecked(this.heapI[a]) > unchecked(this.heapI[b]));
  }

  swap(a: i32, b: i32): void {
    const v = unchecked(this.heapV[a]), i = unchecked(this.heapI[a]);
    unchecked(this.heapV[a] = this.heapV[b]);
    unchecked(this.heapI[a] = this.heapI[b]);
    unchecked(this.heapV[b] = v);
    unchecked(this.heapI[b] = i);
  }

  up(i: i32): void {
    while (i > 0) {
      const p = (i - 1) / 2;
      if (!this.worse(i, p)) return;
      this.swap(i, p);
      i = p;
    }
  }

  down(i: i32, len: i32): void {
    for (;;) {
      let m = i;
      const l = 2 * i + 1, r = 2 * i + 2;
      if (l < len && this.worse(l, m)) m = l;
      if (r < len && this.worse(r, m)) m = r;
      if (m == i) return;
      this.swap(i, m);
      i = m;
    }
  }

  window(w: Window, elems: Array<Record>, n: i32): bool {
    const f = this.span;
    let len = 0;
    for (let i = 0; i < n; i++) {
      const e = unchecked(elems[i]);
      if (json.lookup(e.valuePtr, e.valueLen, this.field, f) != json.FIELD || f.kind() != json.NUMBER) continue;
      const v = json.number(f.ptr, f.len);
      if (!json.numberOk) continue;
      if (len < this.n) {
        unchecked(this.heapV[len] = v);
        unchecked(this.heapI[len] = i);
        len++;
        this.up(len - 1);
      } else if (v > unchecked(this.heapV[0]) || (v == unchecked(this.heapV[0]) && i < unchecked(this.heapI[0]))) {
        unchecked(this.heapV[0] = v);
        unchecked(this.heapI[0] = i);
        this.down(0, len);
      }
    }
    // Heap sort, worst moved to the end: the array ends best first. No two
    // candidates are equal, since indices differ.
    for (let end = len - 1; end > 0; end--) {
      this.swap(0, end);
      this.down(0, end);
    }
    for (let k = 0; k < len; k++) {
      if (!this.output(w, k + 1, unchecked(elems[unchecked(this.heapI[k])]))) return false;
    }
    return true;
  }

  output(w: Window, rank: i32, e: Record): bool {
    let v = e.valuePtr;
    let n = e.valueLen;
    while (n > 0 && isSpace(load<u8>(v))) { v++; n--; }
    while (n > 0 && isSpace(load<u8>(v + n - 1))) n--;
    const out = this.out.reset();
    out.appendString('{"key":').appendQuoted(w.keyPtr, w.keyLen);
    out.appendString(',"window_start":').appendInt(w.start).appendString(',"window_end":').appendInt(w.end);
    out.appendString(',"rank":').appendInt(rank).appendString(',"value":').append(v, n).byte(0x7d);
    return emitBuffer(w.keyPtr, w.keyLen, out, w.end - 1);
  }
}

register(new TopN());
