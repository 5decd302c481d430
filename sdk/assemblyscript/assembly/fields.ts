// fields.ts - fields the host extracts (ABI versions 6 and 7; abi/ABI.md,
// "Version 6" and "Version 7"). An operator that reads a few members of
// JSON values declares their paths once, in open; the host then checks
// each record's value and finds those members natively while it writes the
// batch, so the operator does not scan the JSON itself. A number path's
// value comes parsed (number), and an output value can be handed over as
// a list of parts the host gathers (Parts, emitParts). It mirrors
// sdk/go/fields and sdk/c/eddy_fields.c.
//
//   open(config: usize, len: u32): bool {
//     return fields.declareFields([["card"], ["bid", "price"]], [["amount"]]);
//   }
//   process(r: Record): bool {
//     if (!fields.valid(r)) return true;            // not a JSON object
//     if (!fields.field(r, 1, this.price)) ...      // absent
//     const amount = fields.number(r, 2);           // NaN: absent, not a number
//   }
//
// The entry file of a module that declares fields says
// `export * from "<sdk>/assembly/exports/fields"` (one input) or
// `".../exports/keyedcofields"` (two inputs): both declare version 7,
// which includes every addition before it (keyed state, schema versions,
// two inputs). Fields are read in process and process2, for the record
// being handled; timer batches have no field table (valid is false there).

import { Record, batchLen, batchPtr, emitPartList, fail, opening, setFieldPaths } from "./eddy";
import { hostFields } from "./host";
import { Name, Span } from "./json";

/** Limits of the ABI: paths per module, keys per path. */
export const MAX_FIELDS: i32 = 64;
export const MAX_FIELD_KEYS: i32 = 8;

// @ts-ignore: decorator
@inline const ABSENT: u32 = 0xffffffff;
// @ts-ignore: decorator
@inline const NUMBER_PATH: u32 = 0x80000000;

let declared = false;
// Row entries 0 to spanPaths-1 are spans, spanPaths to allPaths-1 numbers.
let spanPaths: i32 = 0;
let allPaths: i32 = 0;

function namesOf(paths: Array<Array<string>>): Array<Array<Name>> {
  const out = new Array<Array<Name>>(paths.length);
  for (let i = 0; i < paths.length; i++) {
    const p = paths[i];
    const names = new Array<Name>(p.length);
    for (let k = 0; k < p.length; k++) names[k] = new Name(p[k]);
    out[i] = names;
  }
  return out;
}

/** Declares the paths this instance reads: span paths, whose raw values
 *  field() gives, numbered from 0, then number paths (version 7), whose
 *  values number() gives parsed, numbered on from spans.length. Path
 *  ["bid", "price"] is the member price of the object that is the member
 *  bid of the value. Call it once, from open; it returns true, or false
 *  after fail. The host checks the list (no path twice of the same kind)
 *  and fails open with a message naming what is wrong. */
export function declareFields(spans: Array<Array<string>>, numbers: Array<Array<string>> = []): bool {
  if (!mayDeclare()) return false;
  return declare(namesOf(spans), namesOf(numbers));
}

/** declareFields with the keys as raw UTF-8 bytes (json.Name), for
 *  member names taken from the configuration (json.unquoteName). */
export function declareFieldNames(spans: Array<Array<Name>>, numbers: Array<Array<Name>> = []): bool {
  if (!mayDeclare()) return false;
  return declare(spans, numbers);
}

function mayDeclare(): bool {
  if (!opening) return fail("fields: declareFields called outside open: the host takes a module's fields only during eddy_open");
  if (declared) return fail("fields: declareFields called twice: a module declares its fields once, all in one call");
  return true;
}

// The size of the encoded paths, or -1 after fail.
function pathsSize(paths: Array<Array<Name>>): i64 {
  let size: i64 = 0;
  for (let i = 0; i < paths.length; i++) {
    const p = paths[i];
    if (p.length < 1 || p.length > MAX_FIELD_KEYS) {
      fail("fields: a path has 1 to " + MAX_FIELD_KEYS.toString() + " keys, not " + p.length.toString());
      return -1;
    }
    size += 4;
    for (let k = 0; k < p.length; k++) size += 4 + <i64>p[k].len;
  }
  return size;
}

// Writes the paths at at, flag in each key count; returns the end.
function putPaths(at: usize, paths: Array<Array<Name>>, flag: u32): usize {
  for (let i = 0; i < paths.length; i++) {
    const p = paths[i];
    store<u32>(at, <u32>p.length | flag);
    at += 4;
    for (let k = 0; k < p.length; k++) {
      const key = p[k];
      store<u32>(at, key.len);
      memory.copy(at + 4, key.ptr, key.len);
      at += 4 + key.len;
    }
  }
  return at;
}

function declare(spans: Array<Array<Name>>, numbers: Array<Array<Name>>): bool {
  const n = spans.length + numbers.length;
  if (n < 1 || n > MAX_FIELDS) {
    return fail("fields: declareFields of " + n.toString() + " paths: a module declares 1 to " + MAX_FIELDS.toString());
  }
  const s = pathsSize(spans), m = pathsSize(numbers);
  if (s < 0 || m < 0) return false;
  const size = 4 + s + m;
  if (size > 0x7fffffff) return fail("fields: the field list is too long");
  declared = true;
  const list = heap.alloc(<usize>size);
  store<u32>(list, <u32>n);
  putPaths(putPaths(list + 4, spans, 0), numbers, NUMBER_PATH);
  // The host traps on a list it refuses, which fails open with its message.
  hostFields(list, <u32>size);
  heap.free(list);
  spanPaths = spans.length;
  allPaths = n;
  setFieldPaths(<u32>n);
  return true;
}

/** Whether r's value is one valid JSON object; false for a record of a
 *  batch without a field table (no fields declared, a timer batch). */
export function valid(r: Record): bool {
  return r.fieldsRow != 0 && load<u32>(r.fieldsRow) == 1;
}

/** Sets out to the raw value of span path j in r's value (a string with
 *  its quotes and escapes, an object or array whole) and returns true; or
 *  clears out and returns false when the path is absent, the value is not
 *  a valid JSON object, or j is not a span path. The bytes alias the input
 *  batch, as the record does: valid until the current call returns. */
export function field(r: Record, j: i32, out: Span): bool {
  out.clear();
  const row = r.fieldsRow;
  if (row == 0 || <u32>j >= <u32>spanPaths) return false;
  const e = row + 4 + (<usize>j << 3);
  const off = load<u32>(e), len = load<u32>(e + 4);
  // The host puts spans inside the value; one outside the batch (a broken
  // host) reads as absent rather than past it.
  if (off == ABSENT || <u64>off + <u64>len > <u64>batchLen) return false;
  out.set(batchPtr + off, len);
  return true;
}

/** field() for the first out.length span paths in one call (the rest of
 *  out cleared); returns valid(r). */
export function spans(r: Record, out: Array<Span>): bool {
  for (let j = 0; j < out.length; j++) field(r, j, unchecked(out[j]));
  return valid(r);
}

/** The value of number path j (spans.length ≤ j) in r's value, parsed by
 *  the host as the nearest f64 (±Infinity beyond its range); NaN when the
 *  path is absent, its value is not a JSON number, the record's value is
 *  not a valid JSON object, or j is not a number path. Test with isNaN. */
export function number(r: Record, j: i32): f64 {
  const row = r.fieldsRow;
  if (row == 0 || j < spanPaths || j >= allPaths) return NaN;
  return load<f64>(row + 4 + (<usize>j << 3));
}

/** A list of parts (version 7): pieces of memory whose concatenation is
 *  an output value, handed to emitParts. The list itself lives outside the
 *  garbage-collected heap and is reused: reset() it for each value. */
export class Parts {
  ptr: usize = 0;
  n: u32 = 0;
  cap: u32 = 0;

  reset(): Parts { this.n = 0; return this; }

  /** Appends the piece [p, p+len). */
  add(p: usize, len: u32): Parts {
    if (this.n == this.cap) {
      const cap: u32 = this.cap < 8 ? 8 : this.cap * 2;
      this.ptr = this.ptr == 0 ? heap.alloc(<usize>cap << 3) : heap.realloc(this.ptr, <usize>cap << 3);
      this.cap = cap;
    }
    const at = this.ptr + (<usize>this.n << 3);
    store<u32>(at, <u32>p);
    store<u32>(at + 4, len);
    this.n++;
    return this;
  }

  addSpan(s: Span): Parts { return this.add(s.ptr, s.len); }

  /** Appends a Name's bytes: a constant made once (say in open) is a
   *  piece that stays valid as long as the Name is kept. */
  addName(name: Name): Parts { return this.add(name.ptr, name.len); }

  /** Appends span path j of r when it is present; returns whether it was. */
  addField(r: Record, j: i32, scratch: Span): bool {
    if (!field(r, j, scratch)) return false;
    this.add(scratch.ptr, scratch.len);
    return true;
  }
}

/** Emits a record with r's key, timestamp and headers whose value is the
 *  concatenation of the parts, without copying them: the host gathers
 *  them when it takes the output. Each part must stay unchanged until the
 *  current call (process, process2, onTimer, close) returns: the record's
 *  bytes and its spans do, and so do static data (memory.data), Names and
 *  Buffers the operator keeps unchanged; a Buffer reset for the next
 *  record does not. The list is copied, so parts may be reset at once. */
export function emitParts(r: Record, parts: Parts): bool {
  return emitPartList(r.keyPtr, r.keyLen, parts.ptr, parts.n, r.timestamp, r.headersPtr, r.headersLen);
}

/** emitParts with a key and timestamp of its own, no headers. */
export function emitPartsKV(keyPtr: usize, keyLen: u32, parts: Parts, ts: i64): bool {
  return emitPartList(keyPtr, keyLen, parts.ptr, parts.n, ts, 0, 0);
}
