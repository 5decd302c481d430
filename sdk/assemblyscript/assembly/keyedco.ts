// keyedco.ts - two-input keyed operators (ABI version 5; abi/ABI.md,
// "Version 5"): Flink's KeyedCoProcessFunction. A two-input operator runs
// on a wasm node with input: [left, right] and a key per input, key_by:
// [left_key, right_key]; it extends KeyedCoOperator, whose process2 gets
// every record with the input it came from (LEFT or RIGHT) and the
// current key set to the record's. Keyed state and timers are those of
// keyed.ts, one key space for both inputs, and a timer fires once
// (onTimer) whichever input set it. Its entry file says
// `export * from "<sdk>/assembly/exports/keyedco"` (version 5), or
// `.../exports/keyedcofields` when it declares fields (version 7); both
// export eddy_process2, and an eddy_process that refuses.

import { BatchVisitor, Record, fail, operator, runBatch } from "./eddy";
import { KeyedOperator } from "./keyed";

/** The inputs' indexes, as eddy_process2 numbers them. */
export const LEFT: i32 = 0; // the node's first input
export const RIGHT: i32 = 1; // its second

const ONE_INPUT = "eddy: this module is a two-input operator (exports/keyedco): it takes records through eddy_process2, not eddy_process";

/** The base class of a two-input operator. */
export class KeyedCoOperator extends KeyedOperator {
  /** Called for every record of input (LEFT or RIGHT); may emit and use
   *  keyed state and timers, the record's key being current. */
  process2(input: i32, r: Record): bool { return fail("eddy: the two-input operator does not override process2"); }

  /** A two-input operator has no one-input process. */
  process(r: Record): bool { return fail(ONE_INPUT); }
}

class Process2Visitor extends BatchVisitor {
  op: KeyedCoOperator | null = null;
  input: i32 = 0;
  visit(r: Record, index: u32, count: u32): bool {
    return changetype<KeyedCoOperator>(this.op).process2(this.input, r);
  }
}

const process2Visitor = new Process2Visitor();

export function exportProcess2(input: u32, batch: usize, len: u32): i32 {
  const op = operator();
  if (!(op instanceof KeyedCoOperator)) {
    fail("eddy: eddy_process2 called, but the registered operator is not a KeyedCoOperator");
    return 1;
  }
  if (input > 1) {
    fail("eddy: eddy_process2 called for input " + input.toString() + ", not 0 or 1");
    return 1;
  }
  process2Visitor.op = changetype<KeyedCoOperator>(op);
  process2Visitor.input = <i32>input;
  return runBatch("batch", "input batch", batch, len, process2Visitor, true);
}

/** eddy_process of a two-input module: the host never calls it on a
 *  module that exports eddy_process2, so a call means a host that does
 *  not know two-input operators. */
export function exportProcessTwoInput(batch: usize, len: u32): i32 {
  fail(ONE_INPUT);
  return 1;
}
