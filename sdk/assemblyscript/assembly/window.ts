// window.ts - window functions, Flink's ProcessWindowFunction (ABI
// version 3's "window functions"; the module itself is an ordinary
// version 1 operator). Extend WindowFunction and say
// `export * from "<sdk>/assembly/exports/window"` in the entry file: when
// a window fires, window() gets the window and all its elements.

import { BatchVisitor, Operator, Record, fail, operator, runBatch } from "./eddy";

// @ts-ignore: decorator
@inline const DESCRIPTOR_LEN: u32 = 16;

/** The window that fired: its key and bounds (ms, end exclusive). */
export class Window {
  keyPtr: usize = 0;
  keyLen: u32 = 0;
  start: i64 = 0;
  end: i64 = 0;
}

/** The base class of a window function. */
export class WindowFunction extends Operator {
  /** Called once per firing with the window's elements in event-time
   *  order (arrival order for equal timestamps). What it emits gets the
   *  timestamp end - 1. The elements are valid only during the call. */
  window(w: Window, elements: Array<Record>, n: i32): bool { return fail("window: window is not overridden"); }

  process(r: Record): bool { return fail("window: process called in a window function module"); }
}

const theWindow = new Window();
// The elements of the window being handed over; grown, never shrunk, so
// that firing windows allocates nothing once it has seen the largest.
const elements: Array<Record> = [];

class WindowVisitor extends BatchVisitor {
  visit(r: Record, at: u32, count: u32): bool {
    if (at == 0) {
      if (r.valueLen != DESCRIPTOR_LEN) {
        return fail("window: record 0 is not a window descriptor: its value has " + r.valueLen.toString() +
          " bytes, want " + DESCRIPTOR_LEN.toString() + "; is the module used as a window node's apply?");
      }
      const w = theWindow;
      w.keyPtr = r.keyPtr;
      w.keyLen = r.keyLen;
      w.start = load<i64>(r.valuePtr);
      w.end = load<i64>(r.valuePtr + 8);
      while (<u32>elements.length < count - 1) elements.push(new Record());
    } else {
      const e = unchecked(elements[at - 1]);
      e.timestamp = r.timestamp;
      e.keyPtr = r.keyPtr;
      e.keyLen = r.keyLen;
      e.valuePtr = r.valuePtr;
      e.valueLen = r.valueLen;
      e.headersPtr = r.headersPtr;
      e.headersLen = r.headersLen;
    }
    if (at + 1 == count) {
      const op = operator();
      if (!(op instanceof WindowFunction)) return fail("window: the registered operator is not a WindowFunction");
      return changetype<WindowFunction>(op).window(theWindow, elements, <i32>count - 1);
    }
    return true;
  }
}

const windowVisitor = new WindowVisitor();

export function exportWindowProcess(batch: usize, len: u32): i32 {
  const st = runBatch("batch", "input batch", batch, len, windowVisitor);
  if (st == 0 && len >= 8 && load<u32>(batch + 4) == 0) {
    fail("window: an empty batch: a window function's batch starts with the window's descriptor; is the module used as a window node's apply?");
    return 1;
  }
  return st;
}
