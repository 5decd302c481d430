// keyed.ts - keyed state, timers and time (ABI version 2). A keyed
// operator extends KeyedOperator, declares its states in open() and uses
// them in process() and onTimer(), where the key of the record (or of the
// timer firing) is implied, as in Flink. Its entry file says
// `export * from "<sdk>/assembly/exports/keyed"`, which makes the module
// version 2 and exports eddy_on_timer.

import {
  BatchVisitor, Operator, Record, currentKeyLen, currentKeyPtr, fail, hasKey, opening, runBatch,
} from "./eddy";
import {
  hostCurrentWatermark, hostProcessingTime, hostStateAppend, hostStateClear, hostStateDeclare, hostStateGet,
  hostStateList, hostStateMapDelete, hostStateMapEntries, hostStateMapGet, hostStateMapPut, hostStatePut,
  hostTimerDelete, hostTimerRegister,
} from "./host";

export const KIND_VALUE: i32 = 0;
export const KIND_LIST: i32 = 1;
export const KIND_MAP: i32 = 2;

export const EVENT_TIME: i32 = 0;
export const PROCESSING_TIME: i32 = 1;

/** What a read returns when there is nothing. */
export const ABSENT: i32 = -1;
/** What a read returns after fail (the method should return false). */
export const ERROR: i32 = -2;

// @ts-ignore: decorator
@inline const INITIAL_BUFFER: u32 = 256;

function kindName(kind: i32): string {
  return kind == KIND_VALUE ? "value" : kind == KIND_LIST ? "list" : "map";
}

/** A growable read buffer of a state. */
class ReadBuffer {
  ptr: usize = 0;
  cap: u32 = 0;
  grow(need: u32): void {
    let cap = <u64>this.cap * 2;
    if (cap < <u64>need) cap = need;
    if (cap > 0xffffffff) cap = need;
    if (this.ptr != 0) heap.free(this.ptr);
    this.ptr = heap.alloc(<usize>cap);
    this.cap = <u32>cap;
  }
}

/** What every state handle shares: its id, kind and name. */
export class State {
  // Set once by the declaration; treat them as read-only.
  id: i32;
  kind: i32;
  name: string;
  protected getBuf: ReadBuffer = new ReadBuffer();
  protected scan: ReadBuffer = new ReadBuffer();

  constructor(kind: i32, name: string, id: i32) {
    this.kind = kind;
    this.name = name;
    this.id = id;
  }

  protected reinit(name: string, id: i32): void {
    this.name = name;
    this.id = id;
  }

  /** Whether a state call may run now; fails with a message when not. */
  protected usable(what: string): bool {
    if (this.id < 0) return fail("eddy: " + what + " on " + this.name + ", whose declaration failed");
    if (!hasKey) return fail("eddy: " + what + " on " + this.name + " outside process and onTimer, where there is no current key");
    return true;
  }

  /** Removes the current key's value, list or map. */
  clear(): bool {
    if (!this.usable("clear")) return false;
    hostStateClear(this.id, currentKeyPtr, currentKeyLen);
    return true;
  }

  // Reads through op (0 value, 1 list, 2 map get with uk, 3 map entries),
  // growing b until the result fits. Returns the length, ABSENT or ERROR.
  protected fetch(op: i32, b: ReadBuffer, uk: usize, ukLen: u32): i32 {
    if (b.ptr == 0) b.grow(INITIAL_BUFFER);
    for (;;) {
      let n: i32;
      if (op == 0) n = this.read0(b.ptr, b.cap);
      else if (op == 1) n = hostStateList(this.id, currentKeyPtr, currentKeyLen, b.ptr, b.cap);
      else if (op == 2) n = hostStateMapGet(this.id, currentKeyPtr, currentKeyLen, uk, ukLen, b.ptr, b.cap);
      else n = hostStateMapEntries(this.id, currentKeyPtr, currentKeyLen, b.ptr, b.cap);
      if (n == -1) return ABSENT;
      if (n < -1) {
        fail("eddy: the host returned " + n.toString() + " reading state " + this.name);
        return ERROR;
      }
      if (<u32>n <= b.cap) return n;
      b.grow(<u32>n);
    }
    return ERROR; // not reached
  }

  protected read0(p: usize, cap: u32): i32 {
    return hostStateGet(this.id, currentKeyPtr, currentKeyLen, p, cap);
  }
}

function declare(kind: i32, name: string, ttlMs: i64): i32 {
  if (!opening) {
    fail("eddy: " + kindName(kind) + " state " + name + " declared outside open");
    return -1;
  }
  const b = String.UTF8.encode(name);
  const id = hostStateDeclare(kind, changetype<usize>(b), <u32>b.byteLength, ttlMs);
  if (id < 0) fail("eddy: state_declare(" + name + ") returned " + id.toString());
  return id;
}

/** Value state: one byte string per key. */
export class ValueState extends State {
  /** Where the last read() put the value: valid until the next read. */
  data: usize = 0;

  /** Declares (in open: new ValueState("name", ttlMs)) a value state; ttlMs ≤ 0 means no expiry. A failed
   *  declaration has already called fail: open should return false. */
  constructor(name: string, ttlMs: i64 = 0, undeclared: bool = false) {
    // undeclared: a subclass (SchemaValueState) declares it another way.
    super(KIND_VALUE, name, undeclared ? -1 : declare(KIND_VALUE, name, ttlMs));
  }

  /** Reads the current key's value into data and returns its length,
   *  ABSENT or ERROR. */
  read(): i32 {
    if (!this.usable("read")) return ERROR;
    const n = this.fetch(0, this.getBuf, 0, 0);
    this.data = this.getBuf.ptr;
    return n;
  }

  /** The value as a new array, or null when absent (or on ERROR). */
  bytes(): Uint8Array | null {
    const n = this.read();
    if (n < 0) return null;
    const out = new Uint8Array(n);
    memory.copy(out.dataStart, this.data, n);
    return out;
  }

  put(p: usize, n: u32): bool {
    if (!this.usable("put")) return false;
    hostStatePut(this.id, currentKeyPtr, currentKeyLen, p, n);
    return true;
  }

  putBytes(v: Uint8Array): bool { return this.put(v.dataStart, <u32>v.length); }
}

/** A value state holding one number of type T, stored little-endian in
 *  sizeof<T>() bytes (as sdk/go and sdk/c store a counter's uint64). */
export class NumberState<T> extends ValueState {
  /** Whether the last get() found a value. */
  found: bool = false;

  constructor(name: string, ttlMs: i64 = 0) {
    super(name, ttlMs);
  }

  /** The current key's number, or dflt when absent; ERROR or a value of
   *  the wrong size fails (check failed()). */
  get(dflt: T): T {
    this.found = false;
    this.bad = false;
    const n = this.read();
    if (n == ABSENT) return dflt;
    if (n != <i32>sizeof<T>()) {
      this.bad = true;
      if (n != ERROR) fail("eddy: state " + this.name + " has " + n.toString() + " bytes, want " + sizeof<T>().toString());
      return dflt;
    }
    this.found = true;
    return load<T>(this.data);
  }

  /** True after a get() that failed. */
  bad: bool = false;

  set(v: T): bool {
    store<T>(this.scratch, v);
    return this.put(this.scratch, <u32>sizeof<T>());
  }

  private scratch: usize = heap.alloc(8);
}

/** The elements of a list or the entries of a map read by entries()/read(). */
export class Frames {
  private next: usize = 0;
  private left: u32 = 0;
  ptr: usize = 0;
  len: u32 = 0;
  keyPtr: usize = 0;
  keyLen: u32 = 0;

  reset(p: usize, items: u32): void { this.next = p; this.left = items; }

  /** Moves to the next element (ptr/len) or map entry (keyPtr/keyLen and
   *  ptr/len); false after the last. */
  nextElement(): bool {
    if (this.left == 0) return false;
    this.len = load<u32>(this.next);
    this.ptr = this.next + 4;
    this.next = this.ptr + this.len;
    this.left--;
    return true;
  }

  nextEntry(): bool {
    if (this.left == 0) return false;
    this.keyLen = load<u32>(this.next);
    this.keyPtr = this.next + 4;
    const v = this.keyPtr + this.keyLen;
    this.len = load<u32>(v);
    this.ptr = v + 4;
    this.next = this.ptr + this.len;
    this.left--;
    return true;
  }
}

function countFrames(p: usize, n: u32): i64 {
  let at: u64 = 0;
  let frames: i64 = 0;
  while (at < <u64>n) {
    if (<u64>n - at < 4) return -1;
    const len = <u64>load<u32>(p + <usize>at);
    at += 4;
    if (len > <u64>n - at) return -1;
    at += len;
    frames++;
  }
  return frames;
}

/** List state: a list of byte strings per key, oldest first. */
export class ListState extends State {
  frames: Frames = new Frames();

  /** Declares (in open) a list state; ttlMs ≤ 0 means no expiry. */
  constructor(name: string, ttlMs: i64 = 0) {
    super(KIND_LIST, name, declare(KIND_LIST, name, ttlMs));
  }

  add(p: usize, n: u32): bool {
    if (!this.usable("add")) return false;
    hostStateAppend(this.id, currentKeyPtr, currentKeyLen, p, n);
    return true;
  }

  addBytes(v: Uint8Array): bool { return this.add(v.dataStart, <u32>v.length); }

  /** Reads the list: returns the number of elements (0 when empty) or
   *  ERROR; then frames.nextElement() walks them. */
  read(): i32 {
    this.frames.reset(0, 0);
    if (!this.usable("read")) return ERROR;
    const n = this.fetch(1, this.scan, 0, 0);
    if (n == ERROR) return ERROR;
    if (n == ABSENT) return 0;
    const frames = countFrames(this.scan.ptr, <u32>n);
    if (frames < 0) {
      fail("eddy: the host returned a malformed list for state " + this.name);
      return ERROR;
    }
    this.frames.reset(this.scan.ptr, <u32>frames);
    return <i32>frames;
  }
}

/** Map state: a map from user key to byte string per key. */
export class MapState extends State {
  data: usize = 0;
  frames: Frames = new Frames();

  /** Declares (in open) a map state; ttlMs ≤ 0 means no expiry. */
  constructor(name: string, ttlMs: i64 = 0) {
    super(KIND_MAP, name, declare(KIND_MAP, name, ttlMs));
  }

  /** Reads the value of user key uk into data; returns its length,
   *  ABSENT or ERROR. */
  read(uk: usize, ukLen: u32): i32 {
    if (!this.usable("read")) return ERROR;
    const n = this.fetch(2, this.getBuf, uk, ukLen);
    this.data = this.getBuf.ptr;
    return n;
  }

  put(uk: usize, ukLen: u32, p: usize, n: u32): bool {
    if (!this.usable("put")) return false;
    hostStateMapPut(this.id, currentKeyPtr, currentKeyLen, uk, ukLen, p, n);
    return true;
  }

  delete(uk: usize, ukLen: u32): bool {
    if (!this.usable("delete")) return false;
    hostStateMapDelete(this.id, currentKeyPtr, currentKeyLen, uk, ukLen);
    return true;
  }

  /** Reads every entry, in user-key byte order: returns their number or
   *  ERROR; then frames.nextEntry() walks them. */
  entries(): i32 {
    this.frames.reset(0, 0);
    if (!this.usable("entries")) return ERROR;
    const n = this.fetch(3, this.scan, 0, 0);
    if (n == ERROR) return ERROR;
    if (n == ABSENT) return 0;
    const frames = countFrames(this.scan.ptr, <u32>n);
    if (frames < 0 || frames % 2 != 0) {
      fail("eddy: the host returned a malformed map for state " + this.name);
      return ERROR;
    }
    this.frames.reset(this.scan.ptr, <u32>(frames / 2));
    return <i32>(frames / 2);
  }
}

function timerOk(what: string, kind: i32): bool {
  if (kind != EVENT_TIME && kind != PROCESSING_TIME) return fail("eddy: " + what + ": unknown timer kind " + kind.toString());
  if (!hasKey) return fail("eddy: " + what + " outside process and onTimer, where there is no current key");
  return true;
}

/** Sets a timer for the current key (one per kind, key and time). */
export function registerTimer(kind: i32, ts: i64): bool {
  if (!timerOk("registerTimer", kind)) return false;
  hostTimerRegister(kind, currentKeyPtr, currentKeyLen, ts);
  return true;
}

/** Removes a timer of the current key (nothing if not set). */
export function deleteTimer(kind: i32, ts: i64): bool {
  if (!timerOk("deleteTimer", kind)) return false;
  hostTimerDelete(kind, currentKeyPtr, currentKeyLen, ts);
  return true;
}

/** The task's event-time watermark (ms; i64.MIN_VALUE before the first). */
export function currentWatermark(): i64 { return hostCurrentWatermark(); }

/** The wall clock, ms since the epoch. */
export function processingTime(): i64 { return hostProcessingTime(); }

/** A timer that fired. */
export class Timer {
  kind: i32 = 0;
  timestamp: i64 = 0;
  keyPtr: usize = 0;
  keyLen: u32 = 0;
}

/** The base class of a keyed operator. */
export class KeyedOperator extends Operator {
  /** Called for each timer that fired; the timer's key is current. */
  onTimer(t: Timer): bool { return fail("eddy: a timer fired, but the operator does not override onTimer"); }
}

const theTimer = new Timer();

class TimerVisitor extends BatchVisitor {
  op: KeyedOperator | null = null;
  visit(r: Record, index: u32, count: u32): bool {
    if (r.valueLen != 1 || load<u8>(r.valuePtr) > <u8>PROCESSING_TIME) {
      return fail("eddy: timer batch: a timer's value has " + r.valueLen.toString() + " bytes (first " +
        (r.valueLen > 0 ? load<u8>(r.valuePtr).toString() : "-1") + "), want one byte: 0 (event time) or 1 (processing time)");
    }
    const t = theTimer;
    t.kind = load<u8>(r.valuePtr);
    t.timestamp = r.timestamp;
    t.keyPtr = r.keyPtr;
    t.keyLen = r.keyLen;
    return changetype<KeyedOperator>(this.op).onTimer(t);
  }
}

const timerVisitor = new TimerVisitor();

export function exportOnTimer(op: Operator, batch: usize, len: u32): i32 {
  if (!(op instanceof KeyedOperator)) {
    fail("eddy: a timer fired, but the operator is not a KeyedOperator");
    return 1;
  }
  timerVisitor.op = changetype<KeyedOperator>(op);
  return runBatch("timer batch", "timer batch", batch, len, timerVisitor);
}
