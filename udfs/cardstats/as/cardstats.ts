// cardstats.ts - the "card-stats" example aggregate in AssemblyScript: an
// aggregate module (ABI version 3) that sums up each window's card
// transactions. It mirrors udfs/cardstats/stats, which documents the result
// and the accumulator encoding (and udfs/cardstats/c/cardstats.c); the
// three produce the same bytes, accumulators included. Change them
// together. Build: see udfs/Makefile.
import { Buffer, Record, fail, register } from "../../../sdk/assemblyscript/assembly/eddy";
import { Aggregate } from "../../../sdk/assemblyscript/assembly/aggregate";
import * as json from "../../../sdk/assemblyscript/assembly/json";
export * from "../../../sdk/assemblyscript/assembly/exports/aggregate";

const FORMAT: u8 = 1;
const MAX_COUNTRY_LEN: u32 = 255;
const MAX_CENTS: f64 = 9007199254740992.0; // 2^53
const MAX_VARINT_LEN: u32 = 10;

const AMOUNT = new json.Name("amount");
const COUNTRY = new json.Name("country");

/** A decoded accumulator; list aliases the bytes it was decoded from. */
class Acc {
  n: u64 = 0;
  sum: i64 = 0;
  max: i64 = 0;
  countries: u32 = 0;
  list: usize = 0;
  listLen: u32 = 0;
}

// Go's math.Round: half away from zero (JavaScript's Math.round rounds
// half up, which differs for negative halves).
function roundHalfAway(x: f64): f64 {
  const t = Math.trunc(x);
  if (Math.abs(x - t) >= 0.5) return t + Math.sign(x);
  return t;
}

function compare(a: usize, an: u32, b: usize, bn: u32): i32 {
  const c = memory.compare(a, b, an < bn ? an : bn);
  if (c != 0) return c < 0 ? -1 : 1;
  return an < bn ? -1 : an > bn ? 1 : 0;
}

function unzigzag(u: u64): i64 { return <i64>(u >> 1) ^ -<i64>(u & 1); }
function zigzag(v: i64): u64 { return (<u64>v << 1) ^ <u64>(v >> 63); }

let varintAt: u32 = 0;
let varintValue: u64 = 0;

// Reads a minimal unsigned varint at b[varintAt] (encoding/binary's rules,
// refusing encodings longer than necessary).
function uvarint(b: usize, len: u32): bool {
  let x: u64 = 0;
  for (let i: u32 = 0; varintAt + i < len && i < MAX_VARINT_LEN; i++) {
    const c = load<u8>(b + varintAt + i);
    if (c < 0x80) {
      if ((i == MAX_VARINT_LEN - 1 && c > 1) || (i > 0 && c == 0)) return false;
      varintValue = x | (<u64>c << (7 * <u64>i));
      varintAt += i + 1;
      return true;
    }
    x |= <u64>(c & 0x7f) << (7 * <u64>i);
  }
  return false;
}

function malformed(len: u32, why: string): bool {
  return fail("card-stats: malformed accumulator (" + len.toString() + " bytes): " + why);
}

function decode(b: usize, len: u32, a: Acc): bool {
  if (len == 0) return malformed(len, "empty");
  if (load<u8>(b) != FORMAT) return malformed(len, "format " + load<u8>(b).toString() + ", want 1");
  varintAt = 1;
  if (!uvarint(b, len)) return malformed(len, "bad varint");
  a.n = varintValue;
  if (!uvarint(b, len)) return malformed(len, "bad varint");
  a.sum = unzigzag(varintValue);
  if (!uvarint(b, len)) return malformed(len, "bad varint");
  a.max = unzigzag(varintValue);
  a.list = b + varintAt;
  a.listLen = len - varintAt;
  a.countries = 0;
  let prev: usize = 0;
  let prevLen: u32 = 0;
  for (let i: u32 = 0; i < a.listLen;) {
    const end = i + 1 + <u32>load<u8>(a.list + i);
    if (end > a.listLen) return malformed(len, "truncated country");
    if (a.countries > 0 && compare(prev, prevLen, a.list + i + 1, end - i - 1) >= 0) return malformed(len, "countries out of order");
    prev = a.list + i + 1;
    prevLen = end - i - 1;
    i = end;
    a.countries++;
  }
  if ((a.n == 0 && (a.sum != 0 || a.max != 0 || a.countries != 0)) ||
      (a.n != 0 && (a.countries == 0 || <u64>a.countries > a.n))) {
    return malformed(len, "inconsistent counts");
  }
  return true;
}

function putUvarint(dst: Buffer, x: u64): void {
  while (x >= 0x80) {
    dst.byte(<u8>x | 0x80);
    x >>= 7;
  }
  dst.byte(<u8>x);
}

function putHeader(dst: Buffer, n: u64, sum: i64, max: i64): void {
  dst.byte(FORMAT);
  putUvarint(dst, n);
  putUvarint(dst, zigzag(sum));
  putUvarint(dst, zigzag(max));
}

// Formats c/100 with exactly two decimals.
function putCents(dst: Buffer, c: i64): void {
  let u = <u64>c;
  if (c < 0) {
    dst.byte(0x2d);
    u = <u64>0 - u;
  }
  dst.appendUint(u / 100).byte(0x2e);
  const frac = u % 100;
  dst.byte(<u8>(0x30 + frac / 10)).byte(<u8>(0x30 + frac % 10));
}

class CardStats extends Aggregate {
  country: Buffer = new Buffer();
  countryLen: u32 = 0;
  cents: i64 = 0;
  it: json.Iter = new json.Iter();
  amount: json.Span = new json.Span();
  c: json.Span = new json.Span();
  x: Acc = new Acc();
  y: Acc = new Acc();

  open(config: usize, len: u32): bool {
    const it = new json.Iter();
    if (!it.objects(config, len)) return fail("card-stats: config is not a JSON object");
    const st = it.next();
    if (st == json.MALFORMED) return fail("card-stats: config is not valid JSON");
    if (st == json.FIELD) return fail("card-stats: config: unknown key " + it.key.toString() + " (card-stats takes no configuration)");
    return true;
  }

  // Reads the amount in cents and the country of a transaction; whether
  // it counts. It reads the object once, to its end, and takes the first
  // "amount" and the first "country", as json.lookup would.
  parseTxn(v: usize, n: u32): bool {
    const it = this.it, amount = this.amount, c = this.c;
    amount.clear();
    c.clear();
    if (!it.objects(v, n)) return false;
    let st: i32;
    while ((st = it.next()) == json.FIELD) {
      if (!amount.isSet() && it.key.equals(AMOUNT)) amount.copyFrom(it.value);
      else if (!c.isSet() && it.key.equals(COUNTRY)) c.copyFrom(it.value);
    }
    if (st == json.MALFORMED || !amount.isSet() || amount.kind() != json.NUMBER || !c.isSet() || c.kind() != json.STRING) return false;
    const d = json.number(amount.ptr, amount.len);
    if (!json.numberOk) return false;
    const x = roundHalfAway(d * 100);
    if (!(Math.abs(x) <= MAX_CENTS)) return false;
    const country = this.country.reset();
    this.countryLen = json.unquote(c.ptr, c.len, country.reserve(c.len));
    if (this.countryLen > MAX_COUNTRY_LEN) return false;
    this.cents = <i64>x;
    return true;
  }

  create(out: Buffer): bool {
    putHeader(out, 0, 0, 0);
    return true;
  }

  add(out: Buffer, accPtr: usize, accLen: u32, r: Record): bool {
    const counts = this.parseTxn(r.valuePtr, r.valueLen);
    const a = this.x;
    if (!decode(accPtr, accLen, a)) return false;
    if (!counts) {
      out.append(accPtr, accLen);
      return true;
    }
    const cents = this.cents;
    const country = this.country.ptr, clen = this.countryLen;
    const top = a.n > 0 && a.max > cents ? a.max : cents;
    putHeader(out, a.n + 1, a.sum + cents, top); // sums wrap, as in Go
    let pos: u32 = 0;
    while (pos < a.listLen) {
      const end = pos + 1 + <u32>load<u8>(a.list + pos);
      const c = compare(a.list + pos + 1, end - pos - 1, country, clen);
      if (c == 0) {
        out.append(a.list, a.listLen);
        return true;
      }
      if (c > 0) break;
      pos = end;
    }
    out.append(a.list, pos).byte(<u8>clen).append(country, clen).append(a.list + pos, a.listLen - pos);
    return true;
  }

  merge(out: Buffer, xPtr: usize, xLen: u32, yPtr: usize, yLen: u32): bool {
    const x = this.x, y = this.y;
    if (!decode(xPtr, xLen, x) || !decode(yPtr, yLen, y)) return false;
    const top = x.n == 0 || (y.n > 0 && y.max > x.max) ? y.max : x.max;
    putHeader(out, x.n + y.n, x.sum + y.sum, top);
    let i: u32 = 0, j: u32 = 0;
    while (i < x.listLen && j < y.listLen) {
      const ie = i + 1 + <u32>load<u8>(x.list + i), je = j + 1 + <u32>load<u8>(y.list + j);
      const c = compare(x.list + i + 1, ie - i - 1, y.list + j + 1, je - j - 1);
      if (c < 0) {
        out.append(x.list + i, ie - i);
        i = ie;
      } else if (c > 0) {
        out.append(y.list + j, je - j);
        j = je;
      } else {
        out.append(x.list + i, ie - i);
        i = ie;
        j = je;
      }
    }
    out.append(x.list + i, x.listLen - i).append(y.list + j, y.listLen - j);
    return true;
  }

  result(out: Buffer, accPtr: usize, accLen: u32): bool {
    const a = this.x;
    if (!decode(accPtr, accLen, a)) return false;
    out.appendString('{"n":').appendUint(a.n).appendString(',"total":"');
    putCents(out, a.sum);
    if (a.n == 0) {
      out.appendString('","max":null');
    } else {
      out.appendString('","max":"');
      putCents(out, a.max);
      out.byte(0x22);
    }
    out.appendString(',"countries":').appendUint(a.countries).byte(0x7d);
    return true;
  }
}

register(new CardStats());
