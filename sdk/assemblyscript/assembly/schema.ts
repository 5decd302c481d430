// schema.ts - schema versions of value state (ABI version 4). A value
// state declared with a schema version stores every value with it and
// reports, on each read, the version a value was written with, so a new
// version of an operator can convert an old encoding on read. A module
// that uses it says `export * from "<sdk>/assembly/exports/schema"`
// (version 4): the host refuses state_declare2 in a module of version 2.

import { currentKeyLen, currentKeyPtr, fail, opening } from "./eddy";
import { hostStateDeclare2, hostStateGet2 } from "./host";
import { KIND_VALUE, ValueState } from "./keyed";

function declare2(name: string, ttlMs: i64, schema: u32): i32 {
  if (!opening) {
    fail("eddy: value state " + name + " declared outside open");
    return -1;
  }
  const b = String.UTF8.encode(name);
  const id = hostStateDeclare2(KIND_VALUE, changetype<usize>(b), <u32>b.byteLength, ttlMs, schema);
  if (id < 0) fail("eddy: state_declare2(" + name + ") returned " + id.toString());
  return id;
}

const schemaCell: usize = memory.data(4);

/** A value state with a schema version (a u32; 0 is what every older
 *  module wrote). */
export class SchemaValueState extends ValueState {
  /** The schema of the values this instance writes. */
  readonly writes: u32;
  /** The schema the value of the last read() was written with (0 when
   *  absent). */
  schema: u32 = 0;

  constructor(name: string, schema: u32, ttlMs: i64 = 0) {
    // ValueState's constructor would declare with schema 0; declare here.
    super("", 0, true);
    this.reinit(name, declare2(name, ttlMs, schema));
    this.writes = schema;
  }

  protected read0(b: usize, cap: u32): i32 {
    const n = hostStateGet2(this.id, currentKeyPtr, currentKeyLen, b, cap, schemaCell);
    this.schema = load<u32>(schemaCell);
    return n;
  }
}
