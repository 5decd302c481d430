// eddy.ts - the core of the Eddy SDK for AssemblyScript: records, the
// batch encoding of abi/ABI.md, emit, fail and log, the Operator class an
// author extends, and the bodies of the exports (exports/*.ts re-export
// them under the ABI's names, one file per kind of module).
//
// Records are views of the eddy_alloc buffer (pointer + length), not
// copies: one Record object is reused for every record of a batch, so the
// hot path allocates nothing and the garbage collector has nothing to do.
// Copy what you keep beyond the call (Record.value() copies).

import { hostEmit, hostFail, hostLog } from "./host";

export const NO_TIMESTAMP: i64 = i64.MIN_VALUE;

// @ts-ignore: decorator
@inline const BATCH_MAGIC: u32 = 0x31424445; // "EDB1"
// @ts-ignore: decorator
@inline const HEADER_SIZE: u32 = 8;
// @ts-ignore: decorator
@inline const ENTRY_SIZE: u32 = 32;
// @ts-ignore: decorator
@inline const MAX_RECORDS: u32 = 1 << 24;
// @ts-ignore: decorator
@inline const MAX_HEADERS: u32 = 1 << 16;
// @ts-ignore: decorator
@inline export const OUTPUT_BUFFER_SIZE: u32 = 64 * 1024;
// @ts-ignore: decorator
@inline const MIN_INPUT: u32 = 64 * 1024;

/** One record of an input batch. Its bytes alias the input buffer and are
 *  valid only during the call that handed it over. */
export class Record {
  timestamp: i64 = NO_TIMESTAMP;
  keyPtr: usize = 0;
  keyLen: u32 = 0;
  valuePtr: usize = 0;
  valueLen: u32 = 0;
  headersPtr: usize = 0;
  headersLen: u32 = 0;
  /** The record's row of the batch's field table (version 6, fields.ts),
   *  0 when the module declared no fields or the batch has no table. */
  fieldsRow: usize = 0;

  /** A copy of the key. */
  key(): Uint8Array { return copyBytes(this.keyPtr, this.keyLen); }
  /** A copy of the value. */
  value(): Uint8Array { return copyBytes(this.valuePtr, this.valueLen); }
  /** The key decoded as UTF-8. */
  keyString(): string { return String.UTF8.decodeUnsafe(this.keyPtr, this.keyLen); }
  /** The value decoded as UTF-8. */
  valueString(): string { return String.UTF8.decodeUnsafe(this.valuePtr, this.valueLen); }
  hasTimestamp(): bool { return this.timestamp != NO_TIMESTAMP; }

  /** The value of the first header called name, or null. */
  header(name: string): string | null {
    if (this.headersLen < 4) return null;
    const want = String.UTF8.encode(name);
    const wantLen = <u32>want.byteLength;
    let n = load<u32>(this.headersPtr);
    let at = this.headersPtr + 4;
    while (n-- > 0) {
      const kl = load<u32>(at), vl = load<u32>(at + 4);
      const k = at + 8;
      if (kl == wantLen && memory.compare(k, changetype<usize>(want), kl) == 0) {
        return String.UTF8.decodeUnsafe(k + kl, vl);
      }
      at = k + kl + vl;
    }
    return null;
  }
}

/** Copies n bytes at p into a new Uint8Array. */
export function copyBytes(p: usize, n: u32): Uint8Array {
  const out = new Uint8Array(n);
  memory.copy(out.dataStart, p, n);
  return out;
}

/** A growable byte buffer outside the garbage-collected heap, for building
 *  output values without allocating per record. */
export class Buffer {
  ptr: usize = 0;
  len: u32 = 0;
  cap: u32 = 0;

  reset(): Buffer { this.len = 0; return this; }

  /** Makes room for n more bytes and returns where they go. */
  reserve(n: u32): usize {
    const need = <u64>this.len + n;
    if (need > <u64>this.cap || this.ptr == 0) {
      let cap = <u64>this.cap * 2;
      if (cap < need) cap = need;
      if (cap < 64) cap = 64;
      if (cap > 0xffffffff) cap = need;
      this.ptr = this.ptr == 0 ? heap.alloc(<usize>cap) : heap.realloc(this.ptr, <usize>cap);
      this.cap = <u32>cap;
    }
    return this.ptr + this.len;
  }

  byte(c: u8): Buffer {
    store<u8>(this.reserve(1), c);
    this.len++;
    return this;
  }

  append(p: usize, n: u32): Buffer {
    if (n == 0) return this;
    memory.copy(this.reserve(n), p, n);
    this.len += n;
    return this;
  }

  appendBuffer(b: Buffer): Buffer { return this.append(b.ptr, b.len); }

  appendBytes(b: Uint8Array): Buffer { return this.append(b.dataStart, <u32>b.length); }

  /** Appends s as UTF-8. A literal made of ASCII is copied byte by byte. */
  appendString(s: string): Buffer {
    const n = <u32>s.length;
    let ascii = true;
    for (let i: u32 = 0; i < n; i++) {
      if (load<u16>(changetype<usize>(s) + (<usize>i << 1)) >= 0x80) { ascii = false; break; }
    }
    if (!ascii) {
      const b = String.UTF8.encode(s);
      return this.append(changetype<usize>(b), <u32>b.byteLength);
    }
    const at = this.reserve(n);
    for (let i: u32 = 0; i < n; i++) {
      store<u8>(at + i, <u8>load<u16>(changetype<usize>(s) + (<usize>i << 1)));
    }
    this.len += n;
    return this;
  }

  /** Appends v in decimal. */
  appendInt(v: i64): Buffer {
    if (v < 0) {
      this.byte(0x2d);
      return this.appendUint(<u64>0 - <u64>v);
    }
    return this.appendUint(<u64>v);
  }

  /** Appends v in decimal. */
  appendUint(v: u64): Buffer {
    const at = this.reserve(20);
    let n: u32 = 0;
    do {
      store<u8>(at + n, <u8>(0x30 + v % 10));
      v /= 10;
      n++;
    } while (v != 0);
    for (let i: u32 = 0, j = n - 1; i < j; i++, j--) {
      const t = load<u8>(at + i);
      store<u8>(at + i, load<u8>(at + j));
      store<u8>(at + j, t);
    }
    this.len += n;
    return this;
  }

  /** Appends p[0..n) as a JSON string (see json.quote). */
  appendQuoted(p: usize, n: u32): Buffer {
    const at = this.reserve(6 * n + 2);
    this.len += quoteInto(at, p, n);
    return this;
  }

  /** A copy of the contents. */
  toBytes(): Uint8Array { return copyBytes(this.ptr, this.len); }
  toString(): string { return String.UTF8.decodeUnsafe(this.ptr, this.len); }
}

const HEX = "0123456789abcdef";

/** Writes s[0..n) as a JSON string at dst (6n+2 bytes) and returns its
 *  length: '"' and '\\' are escaped, control characters use their short
 *  escape or \u00XX, every other byte is copied (as sdk/c's
 *  eddy_json_quote and Go's abi/jsonscan do). */
export function quoteInto(dst: usize, s: usize, n: u32): u32 {
  let k: u32 = 0;
  store<u8>(dst + k++, 0x22);
  for (let i: u32 = 0; i < n; i++) {
    const c = load<u8>(s + i);
    if (c >= 0x20 && c != 0x22 && c != 0x5c) {
      store<u8>(dst + k++, c);
      continue;
    }
    store<u8>(dst + k++, 0x5c);
    if (c == 0x22 || c == 0x5c) store<u8>(dst + k++, c);
    else if (c == 0x08) store<u8>(dst + k++, 0x62);
    else if (c == 0x0c) store<u8>(dst + k++, 0x66);
    else if (c == 0x0a) store<u8>(dst + k++, 0x6e);
    else if (c == 0x0d) store<u8>(dst + k++, 0x72);
    else if (c == 0x09) store<u8>(dst + k++, 0x74);
    else {
      store<u8>(dst + k++, 0x75);
      store<u8>(dst + k++, 0x30);
      store<u8>(dst + k++, 0x30);
      store<u8>(dst + k++, <u8>HEX.charCodeAt(c >> 4));
      store<u8>(dst + k++, <u8>HEX.charCodeAt(c & 0xf));
    }
  }
  store<u8>(dst + k++, 0x22);
  return k;
}

/** The base class of an operator: override what you need. Every method
 *  returns true on success; on failure, return fail("why"), which makes
 *  the task fail with that message. */
export class Operator {
  /** Called once with the node's config as JSON ({} when absent). The
   *  bytes are valid only during the call. Keyed operators declare their
   *  state here. */
  open(configPtr: usize, configLen: u32): bool { return true; }
  /** Called for every input record. */
  process(r: Record): bool { return fail("eddy: the operator does not override process"); }
  /** Called when the input ends or the task is cancelled; may emit. */
  close(): bool { return true; }
}

// ---- the state of the runtime -------------------------------------------

let theOperator: Operator | null = null;

/** Installs the module's operator; call it once, at the top level of the
 *  entry file. */
export function register(op: Operator): void { theOperator = op; }

export function operator(): Operator {
  const op = theOperator;
  if (op === null) {
    fail("eddy: no operator registered: call register(new MyOperator()) at the top level of the entry file");
    unreachable();
  }
  return op!;
}

let inputPtr: usize = 0;
let inputCap: u32 = 0;

const OUTPUT: usize = memory.data(OUTPUT_BUFFER_SIZE, 8);
let outCount: u32 = 0;
let outData: u32 = OUTPUT_BUFFER_SIZE;

let emitting = false;
let failed = false;

/** The key of the record being processed or of the timer firing. */
export let currentKeyPtr: usize = 0;
export let currentKeyLen: u32 = 0;
export let hasKey = false;
/** True during eddy_open, the only call that may declare state. */
export let opening = false;

/** The batch being handed over (its records' offsets are relative to
 *  it), for fields.ts's bounds check of a span; 0 between batches. */
export let batchPtr: usize = 0;
export let batchLen: u32 = 0;
// The size of a row of the field table of the batches of eddy_process
// and eddy_process2 (4 + 8 × paths), 0 until fields.ts has declared
// fields.
let fieldsRowSize: u32 = 0;

/** Called by fields.ts once the host has taken the module's paths. */
export function setFieldPaths(paths: u32): void { fieldsRowSize = 4 + 8 * paths; }

// ---- fail, log, abort -----------------------------------------------------

/** Sets the error message of the current call and returns false, so that
 *  `return fail("...")` ends a method with a failure. */
export function fail(message: string): bool {
  failed = true;
  const b = String.UTF8.encode(message);
  hostFail(changetype<usize>(b), <u32>b.byteLength);
  return false;
}

export const DEBUG: i32 = 0;
export const INFO: i32 = 1;
export const WARN: i32 = 2;
export const ERROR: i32 = 3;

/** Writes a line to the task log (rate-limited by the host). */
export function log(level: i32, message: string): void {
  const b = String.UTF8.encode(message);
  hostLog(level, changetype<usize>(b), <u32>b.byteLength);
}

/** The handler of AssemblyScript's abort (a failed assert, an index out of
 *  range, `throw`): the build routes it here with
 *  `--use abort=.../eddy/abortHandler`. The module imports no `env.abort`,
 *  which the host does not provide; the message reaches the host through
 *  `fail` and the trap that follows ends the call, so the task fails with
 *  one line naming the message and where it was raised. */
export function abortHandler(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let m = "abort: ";
  m += message !== null ? message : "(no message)";
  if (fileName !== null) m += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  fail(m);
  unreachable();
}

// ---- emit -----------------------------------------------------------------

function recordSize(keyLen: u32, valueLen: u32, headersLen: u32): u64 {
  return <u64>ENTRY_SIZE + keyLen + valueLen + headersLen;
}

/** Writes an entry at index count of buf and its data below *data; returns
 *  the new start of the data. */
function putRecord(buf: usize, count: u32, data: u32, ts: i64, k: usize, kl: u32, v: usize, vl: u32, h: usize, hl: u32): u32 {
  const e = buf + HEADER_SIZE + ENTRY_SIZE * count;
  store<i64>(e, ts);
  if (hl > 0) {
    data -= hl;
    memory.copy(buf + data, h, hl);
    store<u32>(e + 24, data);
    store<u32>(e + 28, hl);
  } else {
    store<u64>(e + 24, 0);
  }
  data -= vl;
  memory.copy(buf + data, v, vl);
  store<u32>(e + 16, data);
  store<u32>(e + 20, vl);
  data -= kl;
  memory.copy(buf + data, k, kl);
  store<u32>(e + 8, data);
  store<u32>(e + 12, kl);
  return data;
}

function flush(): void {
  if (outCount == 0) return;
  store<u32>(OUTPUT, BATCH_MAGIC);
  store<u32>(OUTPUT + 4, outCount);
  hostEmit(OUTPUT, OUTPUT_BUFFER_SIZE);
  outCount = 0;
  outData = OUTPUT_BUFFER_SIZE;
}

// @ts-ignore: decorator
@inline function fits(size: u64): bool {
  return <u64>HEADER_SIZE + <u64>ENTRY_SIZE * outCount + size <= <u64>outData;
}

/** Emits a record with headers; false (after fail) outside the calls that
 *  may emit. The bytes are copied at once. */
export function emitFull(keyPtr: usize, keyLen: u32, valuePtr: usize, valueLen: u32, ts: i64, headersPtr: usize, headersLen: u32): bool {
  return emitEntry(keyPtr, keyLen, valuePtr, valueLen, ts, headersPtr, headersLen, -1);
}

/** Emits a record whose value is the concatenation of the n parts of the
 *  part list at list (version 7: n times an address and a length, u32
 *  each), which is copied at once; the parts are not: the host gathers
 *  them when it takes the output, so they must stay unchanged until the
 *  current call returns (see fields.ts's emitParts). */
export function emitPartList(keyPtr: usize, keyLen: u32, list: usize, n: u32, ts: i64, headersPtr: usize, headersLen: u32): bool {
  if (n > 0x0fffffff) return fail("eddy: a list of " + n.toString() + " parts is too long to emit");
  return emitEntry(keyPtr, keyLen, list, n << 3, ts, headersPtr, headersLen, <i32>n);
}

// Writes one entry: a value, or when parts >= 0 the part list of that
// many parts at [valuePtr, +valueLen), marked as one in value_len.
function emitEntry(keyPtr: usize, keyLen: u32, valuePtr: usize, valueLen: u32, ts: i64, headersPtr: usize, headersLen: u32, parts: i32): bool {
  if (!emitting) return fail("eddy: emit called outside process, onTimer, the aggregate calls and close");
  const size = recordSize(keyLen, valueLen, headersLen);
  if (!fits(size)) flush();
  if (fits(size)) {
    outData = putRecord(OUTPUT, outCount, outData, ts, keyPtr, keyLen, valuePtr, valueLen, headersPtr, headersLen);
    if (parts >= 0) store<u32>(OUTPUT + HEADER_SIZE + ENTRY_SIZE * outCount + 20, 0x80000000 | <u32>parts);
    outCount++;
    return true;
  }
  // Larger than the whole output buffer: hand it over alone, after the
  // records before it so that order is kept.
  const total = <u64>HEADER_SIZE + size;
  if (total > 0x7fffffff) return fail("eddy: a record of " + size.toString() + " bytes is too large to emit");
  const spill = heap.alloc(<usize>total);
  putRecord(spill, 0, <u32>total, ts, keyPtr, keyLen, valuePtr, valueLen, headersPtr, headersLen);
  if (parts >= 0) store<u32>(spill + HEADER_SIZE + 20, 0x80000000 | <u32>parts);
  store<u32>(spill, BATCH_MAGIC);
  store<u32>(spill + 4, 1);
  hostEmit(spill, <u32>total);
  heap.free(spill);
  return true;
}

/** Emits a record with key [keyPtr, +keyLen), value [valuePtr, +valueLen)
 *  and timestamp ts. */
export function emit(keyPtr: usize, keyLen: u32, valuePtr: usize, valueLen: u32, ts: i64): bool {
  return emitFull(keyPtr, keyLen, valuePtr, valueLen, ts, 0, 0);
}

/** Emits r unchanged (key, value, timestamp and headers). */
export function emitRecord(r: Record): bool {
  return emitFull(r.keyPtr, r.keyLen, r.valuePtr, r.valueLen, r.timestamp, r.headersPtr, r.headersLen);
}

/** Emits a record whose value is the buffer's contents. */
export function emitBuffer(keyPtr: usize, keyLen: u32, value: Buffer, ts: i64): bool {
  return emitFull(keyPtr, keyLen, value.ptr, value.len, ts, 0, 0);
}

/** Emits a record built from arrays (for code that prefers them to
 *  pointers; it costs the arrays). */
export function emitBytes(key: Uint8Array, value: Uint8Array, ts: i64): bool {
  return emitFull(key.dataStart, <u32>key.length, value.dataStart, <u32>value.length, ts, 0, 0);
}

// ---- batches ----------------------------------------------------------------

/** Output not yet handed over is dropped when a call fails: the task is
 *  failing anyway. */
export function callFailed(): i32 {
  outCount = 0;
  outData = OUTPUT_BUFFER_SIZE;
  if (!failed) fail("eddy: the operator returned false without calling fail");
  return 1;
}

function headersOk(b: usize, len: u32): bool {
  if (len < 4) return false;
  const n = load<u32>(b);
  if (n > MAX_HEADERS || <u64>n * 8 > <u64>(len - 4)) return false;
  let at: u64 = 4;
  for (let j: u32 = 0; j < n; j++) {
    if (at + 8 > <u64>len) return false;
    const kl = <u64>load<u32>(b + <usize>at), vl = <u64>load<u32>(b + <usize>at + 4);
    at += 8;
    if (at + kl + vl > <u64>len) return false;
    at += kl + vl;
  }
  return true;
}

function inInput(p: usize, len: u32): bool {
  return inputPtr != 0 && p >= inputPtr && <u64>(p - inputPtr) + <u64>len <= <u64>inputCap;
}

function outsideInput(what: string, p: usize, len: u32): i32 {
  fail("eddy: " + what + " [" + p.toString() + ", " + (<u64>p + len).toString() + ") is not inside the buffer returned by eddy_alloc");
  return 1;
}

/** Called for each record of a batch; returns false on failure. */
export abstract class BatchVisitor {
  abstract visit(r: Record, index: u32, count: u32): bool;
}

const theRecord = new Record();

/** Checks a batch as abi.DecodeBatch does, then hands each record to v
 *  with emit allowed and the record's key current. Returns a status.
 *  fieldTable: the batch is one of eddy_process or eddy_process2, which
 *  carries the field table after the entries once the module declared
 *  fields (version 6); each record's fieldsRow then points at its row. */
export function runBatch(range: string, what: string, batch: usize, len: u32, v: BatchVisitor, fieldTable: bool = false): i32 {
  failed = false;
  if (!inInput(batch, len)) return outsideInput(range, batch, len);
  if (len < HEADER_SIZE) {
    fail("eddy: " + what + ": malformed: " + len.toString() + " bytes is shorter than the header");
    return 1;
  }
  if (load<u32>(batch) != BATCH_MAGIC) {
    fail("eddy: " + what + ": malformed: bad magic 0x" + load<u32>(batch).toString(16));
    return 1;
  }
  const count = load<u32>(batch + 4);
  if (count > MAX_RECORDS || <u64>HEADER_SIZE + <u64>count * ENTRY_SIZE > <u64>len) {
    fail("eddy: " + what + ": malformed: " + count.toString() + " records do not fit in " + len.toString() + " bytes");
    return 1;
  }
  const row: u32 = fieldTable ? fieldsRowSize : 0;
  if (row != 0 && <u64>HEADER_SIZE + <u64>count * (ENTRY_SIZE + row) > <u64>len) {
    fail("eddy: " + what + ": malformed: the field table of " + count.toString() + " records does not fit in " + len.toString() + " bytes");
    return 1;
  }
  const table: usize = row != 0 ? batch + HEADER_SIZE + ENTRY_SIZE * count : 0;
  // Every record is checked before the first is processed, so a bad batch
  // fails without partial output.
  for (let i: u32 = 0; i < count; i++) {
    const e = batch + HEADER_SIZE + ENTRY_SIZE * i;
    const ko = <u64>load<u32>(e + 8), kl = <u64>load<u32>(e + 12), vo = <u64>load<u32>(e + 16), vl = <u64>load<u32>(e + 20);
    const ho = <u64>load<u32>(e + 24), hl = <u64>load<u32>(e + 28);
    if (ko + kl > <u64>len || vo + vl > <u64>len || (hl != 0 && (ho + hl > <u64>len || !headersOk(batch + <usize>ho, <u32>hl)))) {
      fail("eddy: " + what + ": malformed: record " + i.toString() + " has a range outside the " + len.toString() + "-byte batch or bad headers");
      return 1;
    }
  }
  emitting = true;
  hasKey = true;
  batchPtr = batch;
  batchLen = len;
  const r = theRecord;
  for (let i: u32 = 0; i < count; i++) {
    const e = batch + HEADER_SIZE + ENTRY_SIZE * i;
    r.timestamp = load<i64>(e);
    r.keyPtr = batch + load<u32>(e + 8);
    r.keyLen = load<u32>(e + 12);
    r.valuePtr = batch + load<u32>(e + 16);
    r.valueLen = load<u32>(e + 20);
    r.headersLen = load<u32>(e + 28);
    r.headersPtr = r.headersLen != 0 ? batch + load<u32>(e + 24) : 0;
    r.fieldsRow = table != 0 ? table + <usize>row * i : 0;
    currentKeyPtr = r.keyPtr;
    currentKeyLen = r.keyLen;
    if (!v.visit(r, i, count)) {
      endBatch();
      return callFailed();
    }
  }
  flush();
  endBatch();
  return 0;
}

function endBatch(): void {
  emitting = false;
  batchPtr = 0;
  batchLen = 0;
  hasKey = false;
  currentKeyPtr = 0;
  currentKeyLen = 0;
}

/** Runs body as an export that may emit but gets no batch
 *  (eddy_agg_create, eddy_close). */
export function runCall(body: () => bool): i32 {
  failed = false;
  emitting = true;
  const ok = body();
  emitting = false;
  if (!ok) return callFailed();
  flush();
  return 0;
}

// ---- the bodies of the exports -----------------------------------------

export function exportAlloc(size: u32): usize {
  if (inputPtr != 0 && size <= inputCap) return inputPtr;
  // Grow geometrically so that a slowly growing batch size does not
  // reallocate every batch; free rather than realloc, since the ABI lets
  // each call invalidate the previous buffer's contents.
  let cap = <u64>(size < MIN_INPUT ? MIN_INPUT : size);
  if (cap < 2 * <u64>inputCap) cap = 2 * <u64>inputCap;
  if (cap > 0x80000000) cap = size;
  if (inputPtr != 0) heap.free(inputPtr);
  inputPtr = heap.alloc(<usize>cap);
  inputCap = <u32>cap;
  return inputPtr;
}

export function exportOpen(config: usize, len: u32): i32 {
  failed = false;
  if (!inInput(config, len)) return outsideInput("config", config, len);
  opening = true;
  const ok = operator().open(config, len);
  opening = false;
  return ok ? 0 : callFailed();
}

class ProcessVisitor extends BatchVisitor {
  visit(r: Record, index: u32, count: u32): bool { return operator().process(r); }
}

const processVisitor = new ProcessVisitor();

export function exportProcess(batch: usize, len: u32): i32 {
  return runBatch("batch", "input batch", batch, len, processVisitor, true);
}

function closeBody(): bool { return operator().close(); }

export function exportClose(): i32 { return runCall(closeBody); }
