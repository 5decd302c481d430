// fieldsguest.ts - the logic of the fields test modules fields.ts (one
// input, exports/fields) and fieldsco.ts (two inputs,
// exports/keyedcofields), which udfs/asfields_test.go runs through the
// real host. The configuration is {"mode": M}:
//
//   ok       declares a, b.c and b; each record becomes its row as text:
//            the validity digit, then "|" and each field's bytes, or "|-"
//   spans    as ok, read with fields.spans
//   parts    as ok, emitted as parts: the spans and static "|", "-",
//            "0", "1", gathered by the host
//   numbers  declares a, then number paths a and b.c: the row as text with
//            each number as f64.toString ("NaN" for none)
//   none     declares nothing: "<valid>|<field 0>|<number 1>"
//   twice    declares a twice (the SDK refuses the second)
//   outside  declares a, then declares in process
//   toomany  declares 65 paths; deep: a path of 9 keys (the SDK refuses)
//   repeat   declares a twice in one list (the host refuses)
//
// A record of the second input goes out with its key prefixed by "r:".
import { Buffer, Record, emitBuffer, fail } from "../assembly/eddy";
import * as fields from "../assembly/fields";
import * as json from "../assembly/json";

const MODE = new json.Name("mode");
const DIGITS = memory.data<u8>([0x30, 0x31]); // "01"
const BAR = memory.data<u8>([0x7c]); // "|"
const DASH = memory.data<u8>([0x2d]); // "-"

export class Guest {
  mode: string = "";
  n: i32 = 0;
  out: Buffer = new Buffer();
  key: Buffer = new Buffer();
  span: json.Span = new json.Span();
  spans: json.Span[] = [new json.Span(), new json.Span(), new json.Span()];
  parts: fields.Parts = new fields.Parts();

  open(config: usize, len: u32): bool {
    const v = new json.Span();
    if (json.lookup(config, len, MODE, v) != json.FIELD || v.kind() != json.STRING) return fail("fieldsguest: config needs a mode");
    const mode = json.unquoteName(v).toString();
    this.mode = mode;
    this.n = 3;
    if (mode == "ok" || mode == "spans" || mode == "parts") return fields.declareFields([["a"], ["b", "c"], ["b"]]);
    if (mode == "numbers") return fields.declareFields([["a"]], [["a"], ["b", "c"]]);
    if (mode == "none") return true;
    if (mode == "twice") return fields.declareFields([["a"]]) && fields.declareFields([["b"]]);
    if (mode == "outside") return fields.declareFields([["a"]]);
    if (mode == "toomany") {
      const many: string[][] = [];
      for (let i = 0; i < 65; i++) many.push(["f" + i.toString()]);
      return fields.declareFields(many);
    }
    if (mode == "deep") return fields.declareFields([["1", "2", "3", "4", "5", "6", "7", "8", "9"]]);
    if (mode == "repeat") return fields.declareFields([["a"], ["a"]]);
    return fail("fieldsguest: unknown mode " + mode);
  }

  each(r: Record, right: bool): bool {
    const key = this.key.reset();
    if (right) key.appendString("r:");
    key.append(r.keyPtr, r.keyLen);
    const mode = this.mode;
    if (mode == "outside") return fields.declareFields([["late"]]);
    if (mode == "parts") {
      const p = this.parts.reset();
      p.add(DIGITS + (fields.valid(r) ? 1 : 0), 1);
      for (let j = 0; j < this.n; j++) {
        p.add(BAR, 1);
        if (!p.addField(r, j, this.span)) p.add(DASH, 1);
      }
      return fields.emitPartsKV(key.ptr, key.len, p, r.timestamp);
    }
    const out = this.out.reset();
    out.byte(fields.valid(r) ? 0x31 : 0x30);
    if (mode == "numbers" || mode == "none") {
      out.byte(0x7c);
      if (fields.field(r, 0, this.span)) out.append(this.span.ptr, this.span.len);
      else out.byte(0x2d);
      for (let j = 1; j < (mode == "none" ? 2 : 3); j++) {
        const x = fields.number(r, j);
        out.byte(0x7c).appendString(isNaN(x) ? "NaN" : x.toString());
      }
    } else {
      if (mode == "spans" && fields.spans(r, this.spans) != fields.valid(r)) return fail("fieldsguest: spans and valid disagree");
      for (let j = 0; j < this.n; j++) {
        const s = unchecked(this.spans[j]);
        if (mode != "spans") fields.field(r, j, s);
        out.byte(0x7c);
        if (s.isSet()) out.append(s.ptr, s.len);
        else out.byte(0x2d);
      }
    }
    return emitBuffer(key.ptr, key.len, out, r.timestamp);
  }
}
