// json.ts - a small, allocation-free JSON scanner: iterate an object's
// members or an array's elements, find a member, compare or unquote a
// string, read a number. Values come back as raw spans of the input, so a
// projection copies them without decoding. It is a port of sdk/c's
// eddy_json.c, which mirrors Go's abi/jsonscan function by function: an
// operator written in any of the languages keeps and drops exactly the
// same records. Change them together.
//
// Positions are i32 (inputs are at most the 64 MiB a module may have), and
// -1 means "not valid".

import { quoteInto } from "./eddy";
import { parseNumber } from "./strconv";

export const MAX_DEPTH: i32 = 512;

export const MALFORMED: i32 = -1;
export const END: i32 = 0;
export const FIELD: i32 = 1;

export const INVALID: i32 = 0;
export const OBJECT: i32 = 1;
export const ARRAY: i32 = 2;
export const STRING: i32 = 3;
export const NUMBER: i32 = 4;
export const TRUE: i32 = 5;
export const FALSE: i32 = 6;
export const NULL: i32 = 7;

/** A span of the input: for values exactly the value's bytes, for member
 *  names the string with its quotes. ptr is 0 for "none". */
export class Span {
  ptr: usize = 0;
  len: u32 = 0;
  isSet(): bool { return this.ptr != 0; }
  set(ptr: usize, len: u32): Span { this.ptr = ptr; this.len = len; return this; }
  copyFrom(s: Span): Span { this.ptr = s.ptr; this.len = s.len; return this; }
  clear(): void { this.ptr = 0; this.len = 0; }
  kind(): i32 { return kindOf(this.ptr, this.len); }
  /** Whether the span, a raw string, equals the name once unescaped. */
  equals(name: Name): bool { return equal(this.ptr, this.len, name.ptr, name.len); }
  /** The span as text (raw, with quotes for strings), for messages. */
  toString(): string { return String.UTF8.decodeUnsafe(this.ptr, this.len); }
}

/** UTF-8 bytes made once from a string, for comparing names. */
export class Name {
  bytes: ArrayBuffer;
  ptr: usize;
  len: u32;
  constructor(s: string) {
    this.bytes = String.UTF8.encode(s);
    this.ptr = changetype<usize>(this.bytes);
    this.len = <u32>this.bytes.byteLength;
  }
  /** A name holding a copy of p[0..n). */
  static fromRaw(p: usize, n: u32): Name {
    const name = new Name("");
    name.bytes = new ArrayBuffer(n);
    memory.copy(changetype<usize>(name.bytes), p, n);
    name.ptr = changetype<usize>(name.bytes);
    name.len = n;
    return name;
  }
  equalsRaw(p: usize, n: u32): bool { return n == this.len && memory.compare(p, this.ptr, n) == 0; }
  toString(): string { return String.UTF8.decodeUnsafe(this.ptr, this.len); }
}

// @ts-ignore: decorator
@inline function isSpace(c: u32): bool { return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d; }
// @ts-ignore: decorator
@inline function isDigit(c: u32): bool { return c - 0x30 < 10; }

function hexVal(c: u32): i32 {
  if (c >= 0x30 && c <= 0x39) return <i32>c - 0x30;
  if (c >= 0x61 && c <= 0x66) return <i32>c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return <i32>c - 0x41 + 10;
  return -1;
}

function hex4(b: usize, n: i32, i: i32): i32 {
  if (i + 4 > n) return -1;
  let r = 0;
  for (let k = i; k < i + 4; k++) {
    const h = hexVal(load<u8>(b + k));
    if (h < 0) return -1;
    r = (r << 4) | h;
  }
  return r;
}

function skipSpace(b: usize, n: i32, i: i32): i32 {
  while (i < n && isSpace(load<u8>(b + i))) i++;
  return i;
}

function stringEnd(b: usize, n: i32, i: i32): i32 {
  i++;
  while (i < n) {
    const c = <u32>load<u8>(b + i);
    if (c == 0x22) return i + 1;
    if (c == 0x5c) {
      if (i + 1 >= n) return -1;
      const e = <u32>load<u8>(b + i + 1);
      if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
        i += 2;
      } else if (e == 0x75) {
        if (hex4(b, n, i + 2) < 0) return -1;
        i += 6;
      } else {
        return -1;
      }
    } else if (c < 0x20) {
      return -1;
    } else {
      i++;
    }
  }
  return -1;
}

function numberEnd(b: usize, n: i32, i: i32): i32 {
  if (i < n && load<u8>(b + i) == 0x2d) i++;
  if (i >= n) return -1;
  const c = <u32>load<u8>(b + i);
  if (c == 0x30) {
    i++;
  } else if (isDigit(c)) {
    while (i < n && isDigit(load<u8>(b + i))) i++;
  } else {
    return -1;
  }
  if (i < n && load<u8>(b + i) == 0x2e) {
    i++;
    const start = i;
    while (i < n && isDigit(load<u8>(b + i))) i++;
    if (i == start) return -1;
  }
  if (i < n && (load<u8>(b + i) | 0x20) == 0x65) {
    i++;
    if (i < n && (load<u8>(b + i) == 0x2b || load<u8>(b + i) == 0x2d)) i++;
    const start = i;
    while (i < n && isDigit(load<u8>(b + i))) i++;
    if (i == start) return -1;
  }
  return i;
}

function literalEnd(b: usize, n: i32, i: i32, lit: string): i32 {
  const m = lit.length;
  if (n - i < m) return -1;
  for (let k = 0; k < m; k++) {
    if (<u32>load<u8>(b + i + k) != <u32>lit.charCodeAt(k)) return -1;
  }
  return i + m;
}

function memberValue(b: usize, n: i32, i: i32): i32 {
  if (i < 0 || i >= n || load<u8>(b + i) != 0x22) return -1;
  i = stringEnd(b, n, i);
  if (i < 0) return -1;
  i = skipSpace(b, n, i);
  if (i >= n || load<u8>(b + i) != 0x3a) return -1;
  return skipSpace(b, n, i + 1);
}

// Bit d set: nesting level d is an object (shared: the scanner never runs
// re-entrantly, one instance per task).
const objects: usize = memory.data(MAX_DEPTH / 8);

function valueEnd(b: usize, n: i32, i: i32): i32 {
  let depth = 0;
  for (;;) {
    if (i < 0 || i >= n) return -1;
    const c = <u32>load<u8>(b + i);
    if (c == 0x7b || c == 0x5b) {
      if (depth == MAX_DEPTH) return -1;
      const at = objects + (depth >> 3);
      const bit = <u8>(<u32>1 << <u32>(depth & 7));
      if (c == 0x7b) store<u8>(at, load<u8>(at) | bit);
      else store<u8>(at, load<u8>(at) & ~bit);
      depth++;
      i = skipSpace(b, n, i + 1);
      if (i < n && ((load<u8>(b + i) == 0x7d && c == 0x7b) || (load<u8>(b + i) == 0x5d && c == 0x5b))) {
        depth--;
        i++;
      } else {
        if (c == 0x7b) i = memberValue(b, n, i);
        continue;
      }
    } else if (c == 0x22) {
      i = stringEnd(b, n, i);
    } else if (c == 0x2d || isDigit(c)) {
      i = numberEnd(b, n, i);
    } else if (c == 0x74) {
      i = literalEnd(b, n, i, "true");
    } else if (c == 0x66) {
      i = literalEnd(b, n, i, "false");
    } else if (c == 0x6e) {
      i = literalEnd(b, n, i, "null");
    } else {
      return -1;
    }
    if (i < 0) return -1;
    // A value ended at b[i]: close containers until one continues.
    for (;;) {
      if (depth == 0) return i;
      i = skipSpace(b, n, i);
      if (i >= n) return -1;
      const object = (<u32>load<u8>(objects + ((depth - 1) >> 3)) & (<u32>1 << <u32>((depth - 1) & 7))) != 0;
      const d = <u32>load<u8>(b + i);
      if (d == 0x2c) {
        i = skipSpace(b, n, i + 1);
        if (object) i = memberValue(b, n, i);
        break;
      }
      if ((object && d == 0x7d) || (!object && d == 0x5d)) {
        depth--;
        i++;
        continue;
      }
      return -1;
    }
  }
  return -1; // not reached: every path above returns or continues
}

/** Whether [b, b+len) is exactly one JSON value, optionally surrounded by
 *  whitespace. */
export function valid(b: usize, len: u32): bool {
  const n = <i32>len;
  const end = valueEnd(b, n, skipSpace(b, n, 0));
  return end >= 0 && skipSpace(b, n, end) == n;
}

/** The kind of a value span, judged by its first byte. */
export function kindOf(p: usize, len: u32): i32 {
  if (len == 0) return INVALID;
  const c = <u32>load<u8>(p);
  if (c == 0x7b) return OBJECT;
  if (c == 0x5b) return ARRAY;
  if (c == 0x22) return STRING;
  if (c == 0x2d || isDigit(c)) return NUMBER;
  if (c == 0x74) return TRUE;
  if (c == 0x66) return FALSE;
  if (c == 0x6e) return NULL;
  return INVALID;
}

// @ts-ignore: decorator
@inline const ITER_FIRST = 0;
// @ts-ignore: decorator
@inline const ITER_MORE = 1;
// @ts-ignore: decorator
@inline const ITER_DONE = 2;
// @ts-ignore: decorator
@inline const ITER_BAD = 3;

/** An iterator over an object's members or an array's elements. The
 *  container must be the whole input, optionally surrounded by whitespace.
 *  After next() returns FIELD, key and value hold the member. Reuse one
 *  iterator: begin() resets it. */
export class Iter {
  key: Span = new Span();
  value: Span = new Span();
  private buf: usize = 0;
  private n: i32 = 0;
  private pos: i32 = 0;
  private object: bool = false;
  private state: i32 = ITER_BAD;

  /** Starts on the object in [b, b+len); false if it does not start, after
   *  whitespace, with '{'. */
  objects(b: usize, len: u32): bool { return this.begin(b, len, 0x7b, true); }
  /** Starts on the array in [b, b+len); false if it does not start with '['. */
  elements(b: usize, len: u32): bool { return this.begin(b, len, 0x5b, false); }

  private begin(b: usize, len: u32, open: u32, object: bool): bool {
    const n = <i32>len;
    const i = skipSpace(b, n, 0);
    this.buf = b;
    this.n = n;
    this.object = object;
    if (i >= n || <u32>load<u8>(b + i) != open) {
      this.state = ITER_BAD;
      return false;
    }
    this.pos = i + 1;
    this.state = ITER_FIRST;
    return true;
  }

  private bad(): i32 {
    this.state = ITER_BAD;
    return MALFORMED;
  }

  /** FIELD with the next member in key (raw, with quotes; empty for
   *  arrays) and value; END after the last once the whole input has been
   *  checked; or MALFORMED (then forever). */
  next(): i32 {
    const b = this.buf, n = this.n;
    if (this.state == ITER_DONE) return END;
    if (this.state == ITER_BAD) return MALFORMED;
    const closer: u32 = this.object ? 0x7d : 0x5d;
    let i = skipSpace(b, n, this.pos);
    if (i < n && <u32>load<u8>(b + i) == closer) {
      if (skipSpace(b, n, i + 1) != n) return this.bad();
      this.state = ITER_DONE;
      return END;
    }
    if (this.state == ITER_MORE) {
      if (i >= n || load<u8>(b + i) != 0x2c) return this.bad();
      i = skipSpace(b, n, i + 1);
    }
    this.key.ptr = b + i;
    this.key.len = 0;
    if (this.object) {
      if (i >= n || load<u8>(b + i) != 0x22) return this.bad();
      const keyEnd = stringEnd(b, n, i);
      if (keyEnd < 0) return this.bad();
      this.key.len = <u32>(keyEnd - i);
      i = skipSpace(b, n, keyEnd);
      if (i >= n || load<u8>(b + i) != 0x3a) return this.bad();
      i = skipSpace(b, n, i + 1);
    }
    const end = valueEnd(b, n, i);
    if (end < 0) return this.bad();
    this.value.ptr = b + i;
    this.value.len = <u32>(end - i);
    this.pos = end;
    this.state = ITER_MORE;
    return FIELD;
  }
}

const lookupIter = new Iter();

/** Finds the first member called name (compared after unescaping) of the
 *  object in [b, b+len), checking the whole object: FIELD with its value
 *  in out, END when absent, MALFORMED when the input is not a valid object. */
export function lookup(b: usize, len: u32, name: Name, out: Span): i32 {
  const it = lookupIter;
  if (!it.objects(b, len)) return MALFORMED;
  let found = false;
  for (;;) {
    const st = it.next();
    if (st == MALFORMED) return MALFORMED;
    if (st == END) return found ? FIELD : END;
    if (!found && equal(it.key.ptr, it.key.len, name.ptr, name.len)) {
      out.copyFrom(it.value);
      found = true;
    }
  }
  return MALFORMED; // not reached
}

function encodeRune(buf: usize, r: i32): i32 {
  if (r < 0x80) {
    store<u8>(buf, <u8>r);
    return 1;
  }
  if (r < 0x800) {
    store<u8>(buf, <u8>(0xc0 | (r >> 6)));
    store<u8>(buf + 1, <u8>(0x80 | (r & 0x3f)));
    return 2;
  }
  if (r < 0x10000) {
    store<u8>(buf, <u8>(0xe0 | (r >> 12)));
    store<u8>(buf + 1, <u8>(0x80 | ((r >> 6) & 0x3f)));
    store<u8>(buf + 2, <u8>(0x80 | (r & 0x3f)));
    return 3;
  }
  store<u8>(buf, <u8>(0xf0 | (r >> 18)));
  store<u8>(buf + 1, <u8>(0x80 | ((r >> 12) & 0x3f)));
  store<u8>(buf + 2, <u8>(0x80 | ((r >> 6) & 0x3f)));
  store<u8>(buf + 3, <u8>(0x80 | (r & 0x3f)));
  return 4;
}

const runeBuf: usize = memory.data(4);
let unescapeNext: i32 = 0;

/** Decodes the escape at c[i] (a backslash) into runeBuf; returns the
 *  byte count and sets unescapeNext. Lone surrogates become U+FFFD; a
 *  sequence the scanner would reject is taken literally (one backslash). */
function unescape(c: usize, n: i32, i: i32): i32 {
  if (i + 1 >= n) {
    store<u8>(runeBuf, 0x5c);
    unescapeNext = i + 1;
    return 1;
  }
  unescapeNext = i + 2;
  const e = <u32>load<u8>(c + i + 1);
  if (e == 0x22 || e == 0x5c || e == 0x2f) { store<u8>(runeBuf, <u8>e); return 1; }
  if (e == 0x62) { store<u8>(runeBuf, 0x08); return 1; }
  if (e == 0x66) { store<u8>(runeBuf, 0x0c); return 1; }
  if (e == 0x6e) { store<u8>(runeBuf, 0x0a); return 1; }
  if (e == 0x72) { store<u8>(runeBuf, 0x0d); return 1; }
  if (e == 0x74) { store<u8>(runeBuf, 0x09); return 1; }
  if (e == 0x75) {
    let r = hex4(c, n, i + 2);
    if (r < 0) {
      store<u8>(runeBuf, 0x5c);
      unescapeNext = i + 1;
      return 1;
    }
    unescapeNext = i + 6;
    if (r >= 0xd800 && r < 0xdc00) {
      const nx = unescapeNext;
      let lo = -1;
      if (nx + 1 < n && load<u8>(c + nx) == 0x5c && load<u8>(c + nx + 1) == 0x75) lo = hex4(c, n, nx + 2);
      if (lo >= 0xdc00 && lo < 0xe000) {
        r = 0x10000 + ((r - 0xd800) << 10) + (lo - 0xdc00);
        unescapeNext += 6;
      } else {
        r = 0xfffd;
      }
    } else if (r >= 0xdc00 && r < 0xe000) {
      r = 0xfffd;
    }
    return encodeRune(runeBuf, r);
  }
  store<u8>(runeBuf, 0x5c);
  unescapeNext = i + 1;
  return 1;
}

/** Whether the raw string span [raw, raw+rawLen), once unescaped, equals
 *  s[0..n). */
export function equal(raw: usize, rawLen: u32, s: usize, n: u32): bool {
  if (rawLen < 2 || load<u8>(raw) != 0x22 || load<u8>(raw + rawLen - 1) != 0x22) return false;
  const c = raw + 1;
  const cn = <i32>rawLen - 2;
  if (<i32>n > cn) return false; // unescaping never lengthens
  let i = 0, k = 0;
  const ni = <i32>n;
  while (i < cn) {
    const ch = load<u8>(c + i);
    if (ch != 0x5c) {
      if (k >= ni || load<u8>(s + k) != ch) return false;
      k++;
      i++;
      continue;
    }
    const m = unescape(c, cn, i);
    if (ni - k < m || memory.compare(s + k, runeBuf, m) != 0) return false;
    k += m;
    i = unescapeNext;
  }
  return k == ni;
}

/** Writes the unescaped content of the raw string span to dst, which must
 *  hold rawLen bytes, and returns its length. */
export function unquote(raw: usize, rawLen: u32, dst: usize): u32 {
  if (rawLen < 2 || load<u8>(raw) != 0x22 || load<u8>(raw + rawLen - 1) != 0x22) return 0;
  const c = raw + 1;
  const cn = <i32>rawLen - 2;
  let i = 0;
  let k: u32 = 0;
  while (i < cn) {
    if (load<u8>(c + i) != 0x5c) {
      const start = i;
      while (i < cn && load<u8>(c + i) != 0x5c) i++;
      memory.copy(dst + k, c + start, i - start);
      k += <u32>(i - start);
      continue;
    }
    const m = unescape(c, cn, i);
    memory.copy(dst + k, runeBuf, m);
    k += <u32>m;
    i = unescapeNext;
  }
  return k;
}

/** The unescaped string as new bytes (for configuration: it allocates). */
export function unquoteName(raw: Span): Name {
  const tmp = heap.alloc(raw.len > 0 ? <usize>raw.len : 1);
  const n = unquote(raw.ptr, raw.len, tmp);
  const name = Name.fromRaw(tmp, n);
  heap.free(tmp);
  return name;
}

/** Writes s[0..n) as a JSON string at dst (6n+2 bytes); see eddy.quoteInto. */
export function quote(dst: usize, s: usize, n: u32): u32 { return quoteInto(dst, s, n); }

const POW10: StaticArray<f64> = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

/** The number's value when it is exactly a JSON number, else NaN with
 *  numberOk false. Most numbers (at most 19 digits fitting in 53 bits,
 *  no exponent) take Clinger's fast path, exact as Go's strconv is; the
 *  rest go through strconv.ts, Go's exact decimal algorithm. */
export let numberOk = false;

export function number(p: usize, len: u32): f64 {
  numberOk = false;
  if (len == 0 || numberEnd(p, <i32>len, 0) != <i32>len) return NaN;
  numberOk = true;
  let i: u32 = 0, digits = 0, exp10 = 0;
  let neg = false;
  let mant: u64 = 0;
  if (load<u8>(p) == 0x2d) { neg = true; i++; }
  let fast = true;
  for (; i < len && isDigit(load<u8>(p + i)); i++) {
    if (++digits > 19) { fast = false; break; }
    mant = mant * 10 + <u64>(load<u8>(p + i) - 0x30);
  }
  if (fast && i < len && load<u8>(p + i) == 0x2e) {
    for (i++; i < len && isDigit(load<u8>(p + i)); i++) {
      if (++digits > 19) { fast = false; break; }
      mant = mant * 10 + <u64>(load<u8>(p + i) - 0x30);
      exp10--;
    }
  }
  if (fast && i == len && mant <= (<u64>1 << 53) && exp10 >= -22) {
    let v = <f64>mant;
    if (exp10 < 0) v /= unchecked(POW10[-exp10]);
    return neg ? -v : v;
  }
  return parseNumber(p, len);
}

/** Whether span is a number, with its value in numberValue. */
export function spanNumber(s: Span): bool {
  numberValue = number(s.ptr, s.len);
  return numberOk;
}

export let numberValue: f64 = 0;
