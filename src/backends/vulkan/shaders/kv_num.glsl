// Bit-exact float conversions for the KV cache mirror, in integer arithmetic only: the device
// copy of a KV row must equal the CPU cache's bytes (KvCache::store), and GLSL leaves both
// packHalf2x16's rounding and the precision of float division (2.5 ULP) to the
// implementation. Everything here takes and returns IEEE bit patterns as uint.

// Round-to-nearest-even float -> half, the same case analysis as fp32_to_fp16 (base/fp16.h):
// NaN stays NaN, overflow gives inf, results below half's normal range round to subnormals.
uint kv_f32_to_f16(uint x) {
  const uint sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) {
    if (x < 0x33000000u) return sign;
    const uint e = x >> 23;
    const uint m = (x & 0x7fffffu) | 0x800000u;
    const uint shift = 126u - e;  // 14 .. 24
    uint h = m >> shift;
    const uint rem = m & ((1u << shift) - 1u);
    const uint half_ulp = 1u << (shift - 1u);
    if (rem > half_ulp || (rem == half_ulp && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  uint h = (x >> 13) - (112u << 10);
  const uint rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) ++h;
  return sign | h;
}

// A finite, non-zero, non-negative float as m * 2^e with m in [2^23, 2^24) (subnormals
// normalised), so the division below needs no special cases.
void kv_unpack(uint bits, out uint m, out int e) {
  const uint ex = bits >> 23, mant = bits & 0x7fffffu;
  if (ex == 0u) {
    const int sh = 23 - findMSB(mant);
    m = mant << uint(sh);
    e = -149 - sh;
  } else {
    m = mant | 0x800000u;
    e = int(ex) - 150;
  }
}

// a / b correctly rounded (nearest even), as the CPU's IEEE division gives it, for a >= 0
// and b > 0 finite: the mantissa quotient by restoring long division (26 quotient bits and a
// sticky remainder), then one rounding at the result's precision (normal or subnormal).
uint kv_div_rn(uint a, uint b) {
  if ((a & 0x7fffffffu) == 0u) return 0u;
  uint ma, mb;
  int ea, eb;
  kv_unpack(a, ma, ea);
  kv_unpack(b, mb, eb);
  uint r = ma, q = 0u;
  for (int i = 0; i < 26; ++i) {  // q = floor(ma / mb * 2^25), in [2^24, 2^26)
    q <<= 1;
    if (r >= mb) {
      r -= mb;
      q |= 1u;
    }
    r <<= 1;
  }
  bool sticky = r != 0u;
  int e = ea - eb - 25;  // a / b = (q + fraction) * 2^e
  if (q >= (1u << 25)) {
    sticky = sticky || (q & 1u) != 0u;
    q >>= 1;
    e += 1;
  }
  // q in [2^24, 2^25): the result lies in [2^(24+e), 2^(25+e)), biased exponent e + 151.
  const int biased = e + 151;
  if (biased >= 255) return 0x7f800000u;
  const int drop = max(1, 2 - biased);  // quotient bits below the result's last mantissa bit
  if (drop > 25) return 0u;             // below half the smallest subnormal
  uint m = q >> uint(drop);
  const uint rem = q & ((1u << uint(drop)) - 1u), half_ulp = 1u << uint(drop - 1);
  if (rem > half_ulp || (rem == half_ulp && (sticky || (m & 1u) != 0u))) ++m;
  // m carries the implicit bit for normal results, so a carry out of the mantissa moves
  // into the exponent by itself (and a subnormal rounding up to 2^23 becomes the smallest normal).
  return (uint(max(biased, 1) - 1) << 23) + m;
}

// nearbyint (round half to even) of a float given as bits, |x| < 2^23, as an int.
int kv_round_even(uint bits) {
  const uint ax = bits & 0x7fffffffu;
  if (ax < 0x3f000000u) return 0;  // |x| < 0.5
  const uint m = (ax & 0x7fffffu) | 0x800000u;
  const uint sh = 150u - (ax >> 23);  // 1 .. 24 for 0.5 <= |x| < 2^23
  uint ip = m >> sh;
  const uint rem = m & ((1u << sh) - 1u), half_ulp = 1u << (sh - 1u);
  if (rem > half_ulp || (rem == half_ulp && (ip & 1u) != 0u)) ++ip;
  return (bits & 0x80000000u) != 0u ? -int(ip) : int(ip);
}

// kv_quantize_q8's scale of a group from its amax (bits): amax / 127.
uint kv_q8_scale(uint amax_bits) { return kv_div_rn(amax_bits, 0x42fe0000u); }

// kv_quantize_q8's code of x (bits) with the group's scale (bits): nearbyint(x / scale)
// clamped to +-127; a zero scale gives 0.
int kv_q8_code(uint x, uint scale) {
  if (scale == 0u) return 0;
  const int c = kv_round_even(kv_div_rn(x & 0x7fffffffu, scale));
  const int a = min(c, 127);
  return (x & 0x80000000u) != 0u ? -a : a;
}
