// split.ts - the "split" example operator in AssemblyScript: one record per
// word of a text. It mirrors udfs/split/splitter, which documents the
// configuration and the exact rules (and udfs/split/c/split.c); change
// them together. Build: see udfs/Makefile.
import { Buffer, Operator, Record, emit, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/operator";

const FIELD = new json.Name("field");
const LOWERCASE = new json.Name("lowercase");

// @ts-ignore: decorator
@inline function isWordByte(c: u32): bool {
  return (c - 0x61 < 26) || (c - 0x41 < 26) || (c - 0x30 < 10);
}

class Split extends Operator {
  field: json.Name | null = null;
  lowercase: bool = false;
  text: Buffer = new Buffer(); // the unescaped member
  word: Buffer = new Buffer(); // the lowered word
  value: Buffer = new Buffer(); // the output value
  span: json.Span = new json.Span();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    let seenField = false, seenLower = false;
    if (!it.objects(config, len)) return fail("split: config is not a JSON object");
    for (;;) {
      const st = it.next();
      if (st == json.MALFORMED) return fail("split: config is not valid JSON");
      if (st == json.END) return true;
      if (it.key.equals(FIELD) && !seenField) {
        seenField = true;
        if (it.value.kind() != json.STRING) return fail("split: config: field must be a string");
        this.field = json.unquoteName(it.value);
      } else if (it.key.equals(LOWERCASE) && !seenLower) {
        seenLower = true;
        const k = it.value.kind();
        if (k == json.TRUE) this.lowercase = true;
        else if (k == json.FALSE) this.lowercase = false;
        else return fail("split: config: lowercase must be true or false");
      } else {
        return fail("split: config: unknown or repeated key " + it.key.toString());
      }
    }
    return true; // not reached
  }

  process(r: Record): bool {
    let text = r.valuePtr;
    let len = r.valueLen;
    const field = this.field;
    if (field !== null) {
      const v = this.span;
      if (json.lookup(r.valuePtr, r.valueLen, field, v) != json.FIELD || v.kind() != json.STRING) return true;
      const dst = this.text.reset().reserve(v.len);
      len = json.unquote(v.ptr, v.len, dst);
      text = dst;
    }
    let i: u32 = 0;
    for (;;) {
      while (i < len && !isWordByte(load<u8>(text + i))) i++;
      const start = i;
      while (i < len && isWordByte(load<u8>(text + i))) i++;
      if (i == start) return true;
      let word = text + start;
      const n = i - start;
      if (this.lowercase) {
        const lw = this.word.reset().reserve(n);
        for (let k: u32 = 0; k < n; k++) {
          let c = load<u8>(word + k);
          if (c - 0x41 < 26) c += 0x20;
          store<u8>(lw + k, c);
        }
        word = lw;
      }
      const out = this.value.reset();
      out.appendString('{"word":"').append(word, n).appendString('"}');
      if (!emit(word, n, out.ptr, out.len, r.timestamp)) return false;
    }
    return true; // not reached
  }
}

register(new Split());
