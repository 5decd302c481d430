// fields.ts - the one-input fields test module (see fieldsguest.ts).
import { Operator, Record, register } from "../assembly/eddy";
import { Guest } from "./fieldsguest";
export * from "../assembly/exports/fields";

class F extends Operator {
  g: Guest = new Guest();
  open(config: usize, len: u32): bool { return this.g.open(config, len); }
  process(r: Record): bool { return this.g.each(r, false); }
}
register(new F());
