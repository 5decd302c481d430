// project.ts - the "project" example operator in AssemblyScript: a JSON
// field projector and filter. It mirrors udfs/project/projection, which
// documents the configuration and the exact rules (and the C version,
// udfs/project/c/project.c); change them together. Build: see udfs/Makefile.
//
// When the configuration names fields or a where clause, it declares them
// as udfs/project/go does (fields.ts, ABI version 7; projection.Declared):
// the "fields" names as span paths, then the where field, as the only
// number path when the clause compares numbers, else as a span path
// unless it is one of the "fields". The host then checks each value,
// finds the members and parses the number; the output value goes out as
// a part list (the record's spans and the configuration's member names,
// projection.Pieces) that the host gathers, so nothing is scanned or
// copied here. With neither, only validity counts and it scans values.
import { Buffer, Operator, Record, emitRecord, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import * as fields from "../../../sdk/assemblyscript/assembly/fields";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/fields";

const OP_NONE = 0, OP_EQ = 1, OP_NE = 2, OP_LT = 3, OP_LE = 4, OP_GT = 5, OP_GE = 6, OP_EXISTS = 7;

const FIELDS = new json.Name("fields");
const WHERE = new json.Name("where");
const FIELD = new json.Name("field");
const OP = new json.Name("op");
const VALUE = new json.Name("value");

class Project extends Operator {
  all: bool = true;
  fields: json.Name[] = [];
  prefixes: Buffer[] = [];
  spans: json.Span[] = [];

  op: i32 = OP_NONE;
  where: json.Name = new json.Name("");
  numeric: bool = false;
  number: f64 = 0;
  text: json.Name = new json.Name("");

  out: Buffer = new Buffer();
  it: json.Iter = new json.Iter();
  cond: json.Span = new json.Span();

  // With fields declared: the where field's span path (-1: none, or it is
  // the number path numberAt), the pieces `{"name":` and `,"name":` of
  // each field, and the part list reused for every output value.
  declared: bool = false;
  whereAt: i32 = -1;
  numberAt: i32 = -1;
  first: Buffer[] = [];
  next: Buffer[] = [];
  parts: fields.Parts = new fields.Parts();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    let seenFields = false, seenWhere = false;
    if (!it.objects(config, len)) return fail("project: config is not a JSON object");
    for (;;) {
      const st = it.next();
      if (st == json.MALFORMED) return fail("project: config is not valid JSON");
      if (st == json.END) break;
      if (it.key.equals(FIELDS) && !seenFields) {
        seenFields = true;
        if (!this.parseFields(it.value)) return false;
      } else if (it.key.equals(WHERE) && !seenWhere) {
        seenWhere = true;
        if (!this.parseWhere(it.value)) return false;
      } else {
        return fail("project: config: unknown or repeated key " + it.key.toString());
      }
    }
    return this.declarePaths();
  }

  // Declares the paths of projection.Declared (see the top of the file).
  declarePaths(): bool {
    const nf = this.fields.length;
    const spans: json.Name[][] = [], numbers: json.Name[][] = [];
    for (let i = 0; i < nf; i++) {
      spans.push([this.fields[i]]);
      const first = new Buffer(), next = new Buffer();
      first.byte(0x7b).appendBuffer(this.prefixes[i]);
      next.byte(0x2c).appendBuffer(this.prefixes[i]);
      this.first.push(first);
      this.next.push(next);
    }
    if (this.op != OP_NONE && this.op != OP_EXISTS && this.numeric) {
      this.numberAt = nf;
      numbers.push([this.where]);
    } else if (this.op != OP_NONE) {
      for (let i = 0; i < nf; i++) {
        if (this.fields[i].equalsRaw(this.where.ptr, this.where.len)) this.whereAt = i;
      }
      if (this.whereAt < 0) {
        this.whereAt = nf;
        spans.push([this.where]);
      }
    }
    if (spans.length + numbers.length == 0) return true; // nothing to read: scan
    this.declared = true;
    return fields.declareFieldNames(spans, numbers);
  }

  parseFields(value: json.Span): bool {
    const it = new json.Iter();
    if (!it.elements(value.ptr, value.len)) return fail("project: config: fields must be an array of strings");
    this.all = false;
    for (;;) {
      const st = it.next();
      if (st == json.END) return true;
      if (st == json.MALFORMED || it.value.kind() != json.STRING) return fail("project: config: fields must be an array of strings");
      const name = json.unquoteName(it.value);
      for (let i = 0; i < this.fields.length; i++) {
        if (this.fields[i].equalsRaw(name.ptr, name.len)) return fail("project: config: field " + it.value.toString() + " is listed twice");
      }
      const prefix = new Buffer();
      prefix.appendQuoted(name.ptr, name.len).byte(0x3a);
      this.fields.push(name);
      this.prefixes.push(prefix);
      this.spans.push(new json.Span());
    }
    return true; // not reached: the loop returns
  }

  parseWhere(value: json.Span): bool {
    const it = new json.Iter();
    const field = new json.Span(), op = new json.Span(), operand = new json.Span();
    if (!it.objects(value.ptr, value.len)) return fail("project: config: where must be an object");
    for (;;) {
      const st = it.next();
      if (st == json.MALFORMED) return fail("project: config: where must be an object");
      if (st == json.END) break;
      if (it.key.equals(FIELD) && !field.isSet()) field.copyFrom(it.value);
      else if (it.key.equals(OP) && !op.isSet()) op.copyFrom(it.value);
      else if (it.key.equals(VALUE) && !operand.isSet()) operand.copyFrom(it.value);
      else return fail("project: config: where: unknown or repeated key " + it.key.toString());
    }
    if (field.kind() != json.STRING) return fail("project: config: where.field must be a string");
    this.where = json.unquoteName(field);
    if (op.kind() != json.STRING) return fail("project: config: where.op must be a string");
    if (op.equals(new json.Name("=="))) this.op = OP_EQ;
    else if (op.equals(new json.Name("!="))) this.op = OP_NE;
    else if (op.equals(new json.Name("<"))) this.op = OP_LT;
    else if (op.equals(new json.Name("<="))) this.op = OP_LE;
    else if (op.equals(new json.Name(">"))) this.op = OP_GT;
    else if (op.equals(new json.Name(">="))) this.op = OP_GE;
    else if (op.equals(new json.Name("exists"))) this.op = OP_EXISTS;
    else return fail("project: config: where.op " + op.toString() + " is not one of ==, !=, <, <=, >, >=, exists");
    if (this.op == OP_EXISTS) {
      if (operand.isSet()) return fail("project: config: where.value is not allowed with exists");
      return true;
    }
    const kind = operand.kind();
    if (kind == json.NUMBER) {
      this.numeric = true;
      this.number = json.number(operand.ptr, operand.len);
      return true;
    }
    if (kind == json.STRING) {
      if (this.op != OP_EQ && this.op != OP_NE) return fail("project: config: strings compare only with == and !=");
      this.text = json.unquoteName(operand);
      return true;
    }
    return fail("project: config: where.value must be a number or a string");
  }

  // Evaluates the where clause on the where field's raw value.
  match(v: json.Span): bool {
    if (!v.isSet()) return false;
    if (this.op == OP_EXISTS) return true;
    if (!this.numeric) {
      if (v.kind() != json.STRING) return false;
      return v.equals(this.text) == (this.op == OP_EQ);
    }
    if (v.kind() != json.NUMBER) return false;
    const x = json.number(v.ptr, v.len);
    if (!json.numberOk) return false;
    return this.compare(x);
  }

  // Evaluates a where clause that compares numbers on x; NaN (no number)
  // never passes.
  compare(x: f64): bool {
    if (isNaN(x)) return false;
    switch (this.op) {
      case OP_EQ: return x == this.number;
      case OP_NE: return x != this.number;
      case OP_LT: return x < this.number;
      case OP_LE: return x <= this.number;
      case OP_GT: return x > this.number;
      case OP_GE: return x >= this.number;
    }
    return false;
  }

  process(r: Record): bool {
    if (this.declared) return this.processFields(r);
    const it = this.it;
    const cond = this.cond;
    cond.clear();
    if (!it.objects(r.valuePtr, r.valueLen)) return true;
    const nf = this.fields.length;
    for (let i = 0; i < nf; i++) unchecked(this.spans[i]).clear();
    for (;;) {
      const st = it.next();
      if (st == json.MALFORMED) return true;
      if (st == json.END) break;
      if (this.op != OP_NONE && !cond.isSet() && it.key.equals(this.where)) cond.copyFrom(it.value);
      for (let i = 0; i < nf; i++) {
        const s = unchecked(this.spans[i]);
        if (!s.isSet() && it.key.equals(unchecked(this.fields[i]))) {
          s.copyFrom(it.value);
          break; // field names are distinct: no other can match
        }
      }
    }
    if (this.op != OP_NONE && !this.match(cond)) return true;
    if (this.all) return emitRecord(r);
    const out = this.out.reset();
    out.byte(0x7b);
    let n = 0;
    for (let i = 0; i < nf; i++) {
      const s = unchecked(this.spans[i]);
      if (!s.isSet()) continue;
      if (n > 0) out.byte(0x2c);
      out.appendBuffer(unchecked(this.prefixes[i]));
      out.append(s.ptr, s.len);
      n++;
    }
    out.byte(0x7d);
    return emitFullOf(r, out);
  }

  // process with what the host found: the where clause on its number or
  // span, then the output as parts of the record's value and of the
  // pieces, which stay as they are until the call returns.
  processFields(r: Record): bool {
    if (!fields.valid(r)) return true;
    const cond = this.cond;
    if (this.numberAt >= 0) {
      if (!this.compare(fields.number(r, this.numberAt))) return true;
    } else if (this.whereAt >= 0) {
      fields.field(r, this.whereAt, cond);
      if (!this.match(cond)) return true;
    }
    const parts = this.parts.reset();
    if (this.all) {
      parts.add(r.valuePtr, r.valueLen);
      return fields.emitParts(r, parts);
    }
    const nf = this.fields.length;
    let n = 0;
    for (let i = 0; i < nf; i++) {
      if (!fields.field(r, i, cond)) continue;
      const prefix = n == 0 ? unchecked(this.first[i]) : unchecked(this.next[i]);
      parts.add(prefix.ptr, prefix.len).add(cond.ptr, cond.len);
      n++;
    }
    if (n == 0) parts.add(EMPTY, 2);
    else parts.add(EMPTY + 1, 1);
    return fields.emitParts(r, parts);
  }
}

const EMPTY = memory.data<u8>([0x7b, 0x7d]); // "{}"; "}" at EMPTY + 1

// The projected value with the record's key, timestamp and headers, as the
// Go and C versions keep them.
function emitFullOf(r: Record, out: Buffer): bool {
  const saved = r.valuePtr, savedLen = r.valueLen;
  r.valuePtr = out.ptr;
  r.valueLen = out.len;
  const ok = emitRecord(r);
  r.valuePtr = saved;
  r.valueLen = savedLen;
  return ok;
}

register(new Project());
