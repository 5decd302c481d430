// strconv.ts - correctly rounded decimal to float64 conversion, for the
// numbers json.number cannot convert on its fast path (more than 19
// digits, exponents, values beyond 2^53). AssemblyScript's parseFloat is
// not correctly rounded on such inputs, and the SDKs must agree with Go's
// strconv.ParseFloat to the bit (a filter on "amount > x" keeps the same
// records in every language). This is Go's strconv/decimal.go algorithm:
// an 800-digit decimal shifted by powers of two until the mantissa is an
// integer, then rounded half to even, with the "truncated" flag for digits
// beyond the 800th.

// @ts-ignore: decorator
@inline const MAX_DIGITS: i32 = 800;
// @ts-ignore: decorator
@inline const MAX_SHIFT: u32 = 60;

const d: usize = memory.data(MAX_DIGITS);     // digits, big-endian, as values 0-9
const tmp: usize = memory.data(MAX_DIGITS + 32); // leftShift's reversed digits
let nd: i32 = 0;
let dp: i32 = 0;
let neg = false;
let trunc = false;

function trim(): void {
  while (nd > 0 && load<u8>(d + nd - 1) == 0) nd--;
  if (nd == 0) dp = 0;
}

function rightShift(k: u32): void {
  let r = 0, w = 0;
  let n: u64 = 0;
  for (; (n >> k) == 0; r++) {
    if (r >= nd) {
      if (n == 0) { nd = 0; return; }
      while ((n >> k) == 0) { n = n * 10; r++; }
      break;
    }
    n = n * 10 + <u64>load<u8>(d + r);
  }
  dp -= r - 1;
  const mask: u64 = (<u64>1 << k) - 1;
  for (; r < nd; r++) {
    const c = <u64>load<u8>(d + r);
    const dig = n >> k;
    n &= mask;
    store<u8>(d + w, <u8>dig);
    w++;
    n = n * 10 + c;
  }
  while (n > 0) {
    const dig = n >> k;
    n &= mask;
    if (w < MAX_DIGITS) { store<u8>(d + w, <u8>dig); w++; }
    else if (dig > 0) trunc = true;
    n = n * 10;
  }
  nd = w;
  trim();
}

function leftShift(k: u32): void {
  // Digits come out lowest first into tmp, then are copied back reversed.
  let m = 0;
  let n: u64 = 0;
  for (let r = nd - 1; r >= 0; r--) {
    n += <u64>load<u8>(d + r) << k;
    const quo = n / 10;
    store<u8>(tmp + m++, <u8>(n - 10 * quo));
    n = quo;
  }
  while (n > 0) {
    const quo = n / 10;
    store<u8>(tmp + m++, <u8>(n - 10 * quo));
    n = quo;
  }
  dp += m - nd;
  const keep = m < MAX_DIGITS ? m : MAX_DIGITS;
  for (let i = 0; i < m; i++) {
    const dig = load<u8>(tmp + m - 1 - i);
    if (i < keep) store<u8>(d + i, dig);
    else if (dig != 0) trunc = true;
  }
  nd = keep;
  trim();
}

function shift(k: i32): void {
  if (nd == 0) return;
  if (k > 0) {
    while (k > <i32>MAX_SHIFT) { leftShift(MAX_SHIFT); k -= MAX_SHIFT; }
    leftShift(<u32>k);
  } else if (k < 0) {
    while (k < -<i32>MAX_SHIFT) { rightShift(MAX_SHIFT); k += MAX_SHIFT; }
    rightShift(<u32>-k);
  }
}

function shouldRoundUp(at: i32): bool {
  if (at < 0 || at >= nd) return false;
  if (load<u8>(d + at) == 5 && at + 1 == nd) { // exactly halfway: round to even
    if (trunc) return true;
    return at > 0 && load<u8>(d + at - 1) % 2 != 0;
  }
  return load<u8>(d + at) >= 5;
}

function roundedInteger(): u64 {
  if (dp > 20) return 0xffffffffffffffff;
  let n: u64 = 0;
  let i = 0;
  for (; i < dp && i < nd; i++) n = n * 10 + <u64>load<u8>(d + i);
  for (; i < dp; i++) n *= 10;
  if (shouldRoundUp(dp)) n++;
  return n;
}

// Reads a JSON number (already validated) into the decimal.
function set(p: usize, len: u32): void {
  let i: u32 = 0;
  nd = 0; dp = 0; neg = false; trunc = false;
  if (load<u8>(p) == 0x2d) { neg = true; i++; }
  let sawdot = false;
  for (; i < len; i++) {
    const c = load<u8>(p + i);
    if (c == 0x2e) { sawdot = true; dp = nd; continue; }
    if (c < 0x30 || c > 0x39) break;
    if (c == 0x30 && nd == 0) { dp--; continue; } // leading zeros
    if (nd < MAX_DIGITS) { store<u8>(d + nd, c - 0x30); nd++; }
    else if (c != 0x30) trunc = true;
  }
  if (!sawdot) dp = nd;
  if (i < len && (load<u8>(p + i) | 0x20) == 0x65) {
    i++;
    let esign = 1;
    if (load<u8>(p + i) == 0x2b) i++;
    else if (load<u8>(p + i) == 0x2d) { i++; esign = -1; }
    let e = 0;
    for (; i < len; i++) {
      if (e < 10000) e = e * 10 + <i32>load<u8>(p + i) - 0x30;
    }
    dp += e * esign;
  }
}

const POWTAB: StaticArray<i32> = [1, 3, 6, 9, 13, 16, 19, 23, 26];

/** The float64 nearest to the JSON number at [p, p+len) (±Infinity beyond
 *  the range), as Go's strconv.ParseFloat rounds it. The input must be a
 *  valid JSON number. */
export function parseNumber(p: usize, len: u32): f64 {
  set(p, len);
  const mantbits: u64 = 52;
  const bias = -1023;
  let exp = 0;
  let mant: u64 = 0;
  let overflow = false;
  if (nd == 0 || dp < -330) {
    exp = bias;
  } else if (dp > 310) {
    overflow = true;
  } else {
    while (dp > 0) {
      const n = dp >= POWTAB.length ? 27 : unchecked(POWTAB[dp]);
      shift(-n);
      exp += n;
    }
    while (dp < 0 || (dp == 0 && load<u8>(d) < 5)) {
      const n = -dp >= POWTAB.length ? 27 : unchecked(POWTAB[-dp]);
      shift(n);
      exp -= n;
    }
    exp--;
    if (exp < bias + 1) {
      const n = bias + 1 - exp;
      shift(-n);
      exp += n;
    }
    if (exp - bias >= (1 << 11) - 1) {
      overflow = true;
    } else {
      shift(<i32>(1 + mantbits));
      mant = roundedInteger();
      if (mant == (<u64>2 << mantbits)) {
        mant >>= 1;
        exp++;
        if (exp - bias >= (1 << 11) - 1) overflow = true;
      }
      if (!overflow && (mant & (<u64>1 << mantbits)) == 0) exp = bias;
    }
  }
  if (overflow) {
    mant = 0;
    exp = (1 << 11) - 1 + bias;
  }
  let bits = mant & ((<u64>1 << mantbits) - 1);
  bits |= <u64>((exp - bias) & ((1 << 11) - 1)) << mantbits;
  if (neg) bits |= <u64>1 << 63;
  return reinterpret<f64>(bits);
}
