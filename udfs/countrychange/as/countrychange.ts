// countrychange.ts - the "country-change" example operator in
// AssemblyScript: a card-fraud rule that alerts when a card is used in two
// countries within a window of event time. It mirrors
// udfs/countrychange/detector, which documents the configuration, the rules
// and the state encoding (and udfs/countrychange/c/countrychange.c);
// change them together. Build: see udfs/Makefile.
import { Buffer, NO_TIMESTAMP, Record, emitBuffer, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import {
  ABSENT, ERROR, EVENT_TIME, KeyedOperator, Timer, ValueState, deleteTimer, registerTimer,
} from "../../../sdk/assemblyscript/assembly/keyed";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/keyed";

const DEFAULT_WINDOW_MS: i64 = 300000;
const MAX_WINDOW_MS: f64 = 9007199254740992.0; // 2^53

const WINDOW_MS = new json.Name("window_ms");
const CARD = new json.Name("card");
const COUNTRY = new json.Name("country");

class CountryChange extends KeyedOperator {
  windowMs: i64 = DEFAULT_WINDOW_MS;
  last: ValueState | null = null;
  cardRaw: json.Span = new json.Span();
  countryRaw: json.Span = new json.Span();
  card: Buffer = new Buffer();
  country: Buffer = new Buffer();
  state: Buffer = new Buffer();
  out: Buffer = new Buffer();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    let seenWindow = false;
    if (!it.objects(config, len)) return fail("country-change: config is not a JSON object");
    for (;;) {
      const st = it.next();
      if (st == json.MALFORMED) return fail("country-change: config is not valid JSON");
      if (st == json.END) break;
      if (!it.key.equals(WINDOW_MS) || seenWindow) {
        return fail("country-change: config: unknown or repeated key " + it.key.toString());
      }
      seenWindow = true;
      const d = json.number(it.value.ptr, it.value.len);
      if (!json.numberOk || d != Math.trunc(d) || d < 1 || d > MAX_WINDOW_MS) {
        return fail("country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53");
      }
      this.windowMs = <i64>d;
    }
    const last = new ValueState("last");
    this.last = last;
    return last.id >= 0;
  }

  // When the cleanup timer of a transaction at ts fires.
  timerFor(ts: i64): i64 { return ts > i64.MAX_VALUE - this.windowMs ? i64.MAX_VALUE : ts + this.windowMs; }

  process(r: Record): bool {
    const ts = r.timestamp;
    if (ts == NO_TIMESTAMP) return true;
    const cardRaw = this.cardRaw, countryRaw = this.countryRaw;
    if (json.lookup(r.valuePtr, r.valueLen, CARD, cardRaw) != json.FIELD || cardRaw.kind() != json.STRING) return true;
    if (json.lookup(r.valuePtr, r.valueLen, COUNTRY, countryRaw) != json.FIELD || countryRaw.kind() != json.STRING) return true;
    const card = this.card.reset(), country = this.country.reset();
    card.len = json.unquote(cardRaw.ptr, cardRaw.len, card.reserve(cardRaw.len));
    country.len = json.unquote(countryRaw.ptr, countryRaw.len, country.reserve(countryRaw.len));

    const last = changetype<ValueState>(this.last);
    const n = last.read();
    if (n == ERROR) return false;
    const have = n != ABSENT;
    let later = true;
    let lastTs: i64 = 0;
    if (have) {
      if (n < 8) return fail("country-change: the stored state has " + n.toString() + " bytes, want at least 8");
      lastTs = load<i64>(last.data);
      const lastCountry = last.data + 8;
      const lastCountryLen = <u32>n - 8;
      // In u64 the difference cannot overflow.
      let gap: u64 = <u64>ts - <u64>lastTs;
      if (ts < lastTs) {
        gap = <u64>lastTs - <u64>ts;
        later = false;
      }
      if (gap <= <u64>this.windowMs &&
          (country.len != lastCountryLen || memory.compare(country.ptr, lastCountry, country.len) != 0)) {
        const from = later ? lastCountry : country.ptr, to = later ? country.ptr : lastCountry;
        const fromLen = later ? lastCountryLen : country.len, toLen = later ? country.len : lastCountryLen;
        const out = this.out.reset();
        out.appendString('{"card":').appendQuoted(card.ptr, card.len);
        out.appendString(',"from":').appendQuoted(from, fromLen);
        out.appendString(',"to":').appendQuoted(to, toLen);
        out.appendString(',"gap_ms":').appendInt(<i64>gap).appendString(',"ts":').appendInt(ts).byte(0x7d);
        if (!emitBuffer(r.keyPtr, r.keyLen, out, ts)) return false;
      }
    }
    if (!later) return true;
    const state = this.state.reset();
    store<i64>(state.reserve(8), ts);
    state.len = 8;
    state.appendBuffer(country);
    if (!last.put(state.ptr, state.len)) return false;
    if (have && !deleteTimer(EVENT_TIME, this.timerFor(lastTs))) return false;
    return registerTimer(EVENT_TIME, this.timerFor(ts));
  }

  // Clears the card's state when its cleanup timer fires, unless a later
  // transaction has replaced the one that set the timer.
  onTimer(t: Timer): bool {
    const last = changetype<ValueState>(this.last);
    const n = last.read();
    if (n == ERROR) return false;
    if (n == ABSENT) return true;
    if (n < 8) return fail("country-change: the stored state has " + n.toString() + " bytes, want at least 8");
    const lastTs = load<i64>(last.data);
    if (this.timerFor(lastTs) <= t.timestamp) return last.clear();
    return true;
  }
}

register(new CountryChange());
