// aggregate.ts - aggregate modules (ABI version 3), Flink's
// AggregateFunction: extend Aggregate, and say
// `export * from "<sdk>/assembly/exports/aggregate"` in the entry file,
// which makes the module version 3 and exports the eddy_agg_* functions
// in place of eddy_process. An accumulator is a byte string the module
// defines; the host keeps it, so it must hold no pointers.

import { BatchVisitor, Buffer, NO_TIMESTAMP, Operator, Record, emit, fail, operator, runBatch, runCall } from "./eddy";

/** The base class of an aggregate module. Each method writes its answer
 *  into out (empty when called) and returns true, or returns fail(...). */
export class Aggregate extends Operator {
  /** An empty accumulator; it must depend only on the configuration. */
  create(out: Buffer): bool { return true; }
  /** acc with the record r added. */
  add(out: Buffer, accPtr: usize, accLen: u32, r: Record): bool { return fail("aggregate: add is not overridden"); }
  /** The merge of accumulators x and y (associative, commutative, and an
   *  empty accumulator changes nothing). */
  merge(out: Buffer, xPtr: usize, xLen: u32, yPtr: usize, yLen: u32): bool { return fail("aggregate: merge is not overridden"); }
  /** The window's result as one JSON value. */
  result(out: Buffer, accPtr: usize, accLen: u32): bool { return fail("aggregate: result is not overridden"); }

  process(r: Record): bool { return fail("aggregate: process called in an aggregate module"); }
}

// @ts-ignore: decorator
@inline const GROUP_HEADER_KEY_LEN: u32 = 4;

function agg(): Aggregate {
  const op = operator();
  if (!(op instanceof Aggregate)) {
    fail("aggregate: the registered operator is not an Aggregate");
    unreachable();
  }
  return changetype<Aggregate>(op);
}

function emitValue(p: usize, n: u32): bool { return emit(0, 0, p, n, NO_TIMESTAMP); }

const folds: StaticArray<Buffer> = [new Buffer(), new Buffer()];
const resultBuf = new Buffer();

function createBody(): bool {
  const out = folds[0].reset();
  if (!agg().create(out)) return false;
  return emitValue(out.ptr, out.len);
}

export function exportAggCreate(): i32 { return runCall(createBody); }

/** Folds groups: a header (4-byte key: the member count; value: the
 *  accumulator to start from) and its members; emits one accumulator per
 *  group. Two buffers alternate, so the accumulator being folded is never
 *  the one being written. */
class FoldVisitor extends BatchVisitor {
  what: string = "";
  merging: bool = false;
  left: u32 = 0;
  accPtr: usize = 0;
  accLen: u32 = 0;
  w: i32 = 0;

  visit(r: Record, at: u32, count: u32): bool {
    if (this.left > 0) return this.member(r);
    if (r.keyLen != GROUP_HEADER_KEY_LEN) {
      return fail("aggregate: " + this.what + ": record " + at.toString() + " should be a group header, with a " +
        GROUP_HEADER_KEY_LEN.toString() + "-byte key, but its key has " + r.keyLen.toString() + " bytes");
    }
    const n = load<u32>(r.keyPtr);
    if (n > count - at - 1) {
      return fail("aggregate: " + this.what + ": the group header at record " + at.toString() + " announces " +
        n.toString() + " records, but only " + (count - at - 1).toString() + " follow");
    }
    this.accPtr = r.valuePtr;
    this.accLen = r.valueLen;
    this.left = n;
    this.w = 0;
    return n == 0 ? emitValue(this.accPtr, this.accLen) : true;
  }

  member(r: Record): bool {
    const dst = unchecked(folds[this.w]).reset();
    const a = agg();
    const ok = this.merging ? a.merge(dst, this.accPtr, this.accLen, r.valuePtr, r.valueLen) : a.add(dst, this.accPtr, this.accLen, r);
    if (!ok) return false;
    this.accPtr = dst.ptr;
    this.accLen = dst.len;
    this.w ^= 1;
    return --this.left == 0 ? emitValue(this.accPtr, this.accLen) : true;
  }
}

const foldVisitor = new FoldVisitor();

function fold(what: string, merging: bool, batch: usize, len: u32): i32 {
  foldVisitor.what = what;
  foldVisitor.merging = merging;
  foldVisitor.left = 0;
  return runBatch(what + " batch", what + " batch", batch, len, foldVisitor);
}

export function exportAggAdd(batch: usize, len: u32): i32 { return fold("eddy_agg_add", false, batch, len); }
export function exportAggMerge(batch: usize, len: u32): i32 { return fold("eddy_agg_merge", true, batch, len); }

class ResultVisitor extends BatchVisitor {
  visit(r: Record, at: u32, count: u32): bool {
    const out = resultBuf.reset();
    if (!agg().result(out, r.valuePtr, r.valueLen)) return false;
    return emitValue(out.ptr, out.len);
  }
}

const resultVisitor = new ResultVisitor();

export function exportAggResult(batch: usize, len: u32): i32 {
  return runBatch("eddy_agg_result batch", "eddy_agg_result batch", batch, len, resultVisitor);
}

export function exportAggProcess(): i32 {
  fail("aggregate: this module is an aggregate module (its entry file exports exports/aggregate), not an operator: " +
    "use it as a window node's aggregate, which calls eddy_agg_add, not eddy_process");
  return 1;
}
