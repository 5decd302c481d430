// fieldsco.ts - the two-input fields test module (see fieldsguest.ts).
import { Record, register } from "../assembly/eddy";
import { KeyedCoOperator, RIGHT } from "../assembly/keyedco";
import { Guest } from "./fieldsguest";
export * from "../assembly/exports/keyedcofields";

class F extends KeyedCoOperator {
  g: Guest = new Guest();
  open(config: usize, len: u32): bool { return this.g.open(config, len); }
  process2(input: i32, r: Record): bool { return this.g.each(r, input == RIGHT); }
}
register(new F());
