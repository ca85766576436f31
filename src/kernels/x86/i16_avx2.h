// int16-activation vector traits and per-type micro-kernels of the AVX2 level, for the drivers
// drivers/i16_tile.h (S16), drivers/i16_gemm.h (T256) and drivers/i16_panels.h (P256), whose
// contracts are documented there; the micro-kernels' scale halves are drivers/i16_groups.h. Shared by the avx2 table's files (i16act_avx2.cpp,
// i16panel_avx2.cpp) and the avxvnni table's (i16act_avxvnni.cpp, i16panel_avxvnni.cpp): the
// VNNI traits derive from these and replace only the pair product, so both levels decode and
// scale with the same code and give the same results bit for bit.
//
// Include only from files built with the AVX2 flags, with or without -mavxvnni (simd_avx2.h
// checks). Everything here sits in an unnamed namespace: each file has its own copy, so the
// linker never keeps a build made with -mavxvnni for a caller on an AVX2-only CPU.
//
// Integer dots: a unit's 32 weight codes are widened to int16 (vpmovzxbw / vpmovsxbw) and
// multiplied with the activation codes by vpmaddwd: int16 x int16 products summed in pairs to
// int32, then the two halves added, i.e. 4 products per int32 lane. With |code| <= 4096 (the
// driver's bound; here at most 32 * 128 for Q6_K, 128 for Q8_0) that cannot overflow.
// Offsets: Q4_0's -8 d and Q5_0's -16 d are min terms (one FMA per group and activation row is
// cheaper than subtracting from every code of every weight row); Q6_K's -32 and its 16 sub-scales
// are folded into the codes ((q - 32) * sc, vpmullw), as the offset shares each sub-scale.
//
// Measured on this project's AVX2 box (bench_kernels, one thread): vpmaddwd is the bottleneck
// (about one per two cycles there), so the kernels save vector ops around it: codes widened from
// bytes with one vpmovzxbw, the f32 work done per group of 8 units (drivers/i16_tile.h).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/drivers/i16_gemm.h"
#include "kernels/drivers/i16_groups.h"
#include "kernels/drivers/i16_panels.h"
#include "kernels/drivers/i16_tile.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx2.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

PLLM_AI __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
PLLM_AI __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// An activation pair (a[0], a[1]) in every int32 lane: the pair products' broadcast operand.
PLLM_AI __m256i bcast_pair(const int16_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm256_set1_epi32(v);
}

// ------------------------------------------------------------------ driver traits
struct S16 {
  using F = __m256;
  using I = __m256i;
  struct Q {
    __m256i lo, hi;  // elements 0..15, 16..31 of the unit
  };
  static constexpr int kLanes = 8;
  static PLLM_AI F zero() { return _mm256_setzero_ps(); }
  static PLLM_AI I izero() { return _mm256_setzero_si256(); }
  static PLLM_AI F load(const float* p) { return _mm256_loadu_ps(p); }
  static PLLM_AI F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI F fma(F acc, F a, F b) { return _mm256_fmadd_ps(a, b, acc); }
  static PLLM_AI float hsum(F v) { return avx2::hsum(v); }
  static PLLM_AI I dot(const Q& q, const int16_t* a) {
    return _mm256_add_epi32(_mm256_madd_epi16(q.lo, load256(a)), _mm256_madd_epi16(q.hi, load256(a + 16)));
  }
  static PLLM_AI void prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
  // The add tree. join1(u0, u1): lanes (u0 02, u1 02, u0 13, u1 13 | u0 46, u1 46, u0 57, u1 57)
  // where u0 02 = u0 lane 0 + lane 2 (8 products); join2 of two of those: (u0..u3 over lanes 0-3
  // | u0..u3 over lanes 4-7), 16 products per lane: the most an int32 lane may hold, so the
  // halves are added in f32 (exact below 2^24, as for every type but Q6_K).
  static PLLM_AI I join1(I a, I b) { return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)); }
  static PLLM_AI I join2(I a, I b) { return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)); }
  static PLLM_AI void totals(I lo4, I hi4, F t[1]) {
    const F a = _mm256_cvtepi32_ps(lo4), b = _mm256_cvtepi32_ps(hi4);  // (A_lo | A_hi), (B_lo | B_hi)
    t[0] = _mm256_add_ps(_mm256_blend_ps(a, b, 0xF0), _mm256_permute2f128_ps(a, b, 0x21));
  }
};
using Q = S16::Q;

// The prefill GEMM's traits (drivers/i16_gemm.h): lane i = weight row i, 2 x 8 rows x 3
// activation rows per register tile (12 int32 halves, a broadcast and a product in the 16
// registers; the code vectors are memory operands). bench_kernels Q4_0 576x1536 x 64 on Zen 5:
// 693 us; 2 x 8 x 2: 845, 8 x 4: 731, 3 x 8 x 2: 810; exact's f32 GEMM 1025. Without VNNI a pair product is vpmaddwd and its accumulation a vpaddd on
// another port; where vpmaddwd issues twice per cycle (Zen 3 and later) that is twice the
// products per cycle of exact mode's f32 FMAs.
struct T256 {
  static constexpr int kLanes = 8, kRowVecs = 2, kTileX = 3;
  using V = __m256i;
  using VF = __m256;
  using Q = S16::Q;
  static PLLM_AI V load(const int32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static PLLM_AI V madd(V w, const int16_t* a) { return _mm256_madd_epi16(w, bcast_pair(a)); }
  // The empty asm pins each sum in a register in order: without it GCC reassociates the integer
  // adds into trees of products and spills the products (measured as slow as exact mode's GEMM).
  static PLLM_AI V dp(V acc, V w, const int16_t* a) {
    V r = _mm256_add_epi32(acc, madd(w, a));
    __asm__("" : "+x"(r));
    return r;
  }
  static PLLM_AI VF cvt(V v) { return _mm256_cvtepi32_ps(v); }
  static PLLM_AI VF add(VF a, VF b) { return _mm256_add_ps(a, b); }
  static PLLM_AI VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI VF fma(VF acc, VF a, VF b) { return _mm256_fmadd_ps(a, b, acc); }
  static PLLM_AI VF loadf(const float* p) { return _mm256_load_ps(p); }
  static PLLM_AI void storef(float* p, VF v) { _mm256_store_ps(p, v); }
  static PLLM_AI VF bcast(float f) { return _mm256_set1_ps(f); }
  // 8 rows x 16 dwords as two 8 x 8 transposes (pairs 0-7, 8-15): 32-bit, then 64-bit unpacks,
  // then 128-bit lane swaps.
  static PLLM_AI void transpose(const int32_t* src, int32_t* dst, int ds) {
    for (int h = 0; h < 2; ++h) {
      __m256i r[8], t[8];
      for (int i = 0; i < 8; ++i) r[i] = load(src + 16 * i + 8 * h);
      for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
      }
      for (int i = 0; i < 2; ++i) {  // rows 4i .. 4i + 3: columns (0 | 4), (1 | 5), (2 | 6), (3 | 7)
        r[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
      }
      for (int c = 0; c < 4; ++c) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst + (8 * h + c) * ds), _mm256_permute2x128_si256(r[c], r[4 + c], 0x20));
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst + (8 * h + c + 4) * ds), _mm256_permute2x128_si256(r[c], r[4 + c], 0x31));
      }
    }
  }
};

// ------------------------------------------------------------------ micro-kernels
// 32-element blocks: a group is 8 consecutive blocks; its fp16 field at byte `off` of each of
// the first nu blocks as 8 f32 lanes (0 beyond nu). Gathered with scalar loads and shifts, which
// run beside the vector work.
template <class W>
PLLM_AI __m256 gather_h(const W* w, int nu, int off) {
  uint64_t q[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    if (i >= nu) break;  // blocks beyond the row are not read
    uint16_t h;
    std::memcpy(&h, reinterpret_cast<const uint8_t*>(w + i) + off, 2);
    q[i / 4] |= uint64_t(h) << (16 * (i % 4));
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(q[1]), static_cast<long long>(q[0])));
}

// The group operations of drivers/i16_groups.h: 8 f32 lanes, lane j = block or unit j.
struct Group256 {
  using F = __m256;
  template <class W>
  static PLLM_AI F gather_h(const W* w, int nu, int off) { return kern::gather_h(w, nu, off); }
  static PLLM_AI F bcast_h(const uint16_t& h) { return avx2::bcast_h(h); }
  static PLLM_AI F u8_to_f(const uint8_t* p) { return _mm256_cvtepi32_ps(avx2::zx8(p)); }
  static PLLM_AI F set1(float x) { return _mm256_set1_ps(x); }
  static PLLM_AI F zero() { return _mm256_setzero_ps(); }
  static PLLM_AI F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI F sub(F a, F b) { return _mm256_sub_ps(a, b); }
};

// The 4-bit q of a block in element order (low nibbles, then high): the 16 bytes widened to
// words once, each word holding both nibbles.
PLLM_AI void nibbles(const uint8_t* qs, __m256i& lo, __m256i& hi) {
  const __m256i v = _mm256_cvtepu8_epi16(load128(qs));
  lo = _mm256_and_si256(v, _mm256_set1_epi16(0x0F));
  hi = _mm256_srli_epi16(v, 4);
}

// Q5 fifth bits: bit j of the 16-bit half qh16 as an all-ones word in lane j.
PLLM_AI __m256i q5_bits(uint16_t qh16) {
  const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                        static_cast<short>(0x8000));
  return _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<short>(qh16)), bit), bit);
}

// Register tiles: two weight rows against one activation row share its loads and d_a (5-14 %
// faster than one, except for Q6_K, whose decode then runs out of registers: 9 % slower); with
// more activation rows one weight row (the tree states of 2 x NX pairs would spill).
struct Rows2 {
  static constexpr int tile_rows(int nx) { return nx == 1 ? 2 : 1; }
};
struct Rows1 {
  static constexpr int tile_rows(int) { return 1; }
};

// The scale halves (drivers/i16_groups.h); the codes below.
using Groups = drivers::I16Groups<Group256, Rows2>;

struct MQ4_0 : Groups::Q4_0 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { nibbles(w[u].qs, q.lo, q.hi); }
};

struct MQ4_1 : Groups::Q4_1 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { nibbles(w[u].qs, q.lo, q.hi); }
};

// q = nibble | fifth bit << 4 (0..31)
PLLM_AI void q5_codes(const uint8_t* qh, const uint8_t* qs, Q& q) {
  uint16_t h[2];
  std::memcpy(h, qh, 4);
  nibbles(qs, q.lo, q.hi);
  const __m256i e16 = _mm256_set1_epi16(16);
  q.lo = _mm256_or_si256(q.lo, _mm256_and_si256(q5_bits(h[0]), e16));
  q.hi = _mm256_or_si256(q.hi, _mm256_and_si256(q5_bits(h[1]), e16));
}

struct MQ5_0 : Groups::Q5_0 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q5_codes(w[u].qh, w[u].qs, q); }
};

struct MQ5_1 : Groups::Q5_1 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q5_codes(w[u].qh, w[u].qs, q); }
};

struct MQ8_0 : Groups::Q8_0 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    q.lo = _mm256_cvtepi8_epi16(load128(w[u].qs));
    q.hi = _mm256_cvtepi8_epi16(load128(w[u].qs + 16));
  }
};

// Unit j's codes: the low nibbles of the 32-byte group j / 2 for even j, high for odd.
struct MQ4_K : Groups::Q4_K {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    const uint8_t* p = w->qs + 32 * (u / 2);
    const __m256i a = _mm256_cvtepu8_epi16(load128(p)), c = _mm256_cvtepu8_epi16(load128(p + 16));
    if (u & 1) {
      q.lo = _mm256_srli_epi16(a, 4);
      q.hi = _mm256_srli_epi16(c, 4);
    } else {
      const __m256i m4 = _mm256_set1_epi16(0x0F);
      q.lo = _mm256_and_si256(a, m4);
      q.hi = _mm256_and_si256(c, m4);
    }
  }
};

// Unit u = 4 h + k (128-element half h, quarter k): q = (4 bits of ql | 2 bits of qh << 4) - 32
// with sc[2u] for its first 16 elements and sc[2u + 1] for the rest, folded into the codes
// (|code| <= 32 * 128); x = d * code. Decoded as 32 bytes, widened at the end. (Keeping the two
// halves' integer dots apart and scaling them in f32 instead of vpmullw measured 6 % faster
// at one activation row, 20 % slower at 4-8: a bigger add tree per activation row.)
struct MQ6_K : Rows1 {
  using W = block_q6_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  // The 16 scales as words, 0-7 and 8-15 each in both 128-bit halves: a unit's pair is then
  // broadcast by one in-lane vpshufb each.
  struct G { __m256 d; __m256i s07, s8f; };
  static PLLM_AI G group(const W* w, int) {
    const __m256i s = _mm256_cvtepi8_epi16(load128(w->scales));
    return {avx2::bcast_h(w->d), _mm256_permute4x64_epi64(s, 0x44), _mm256_permute4x64_epi64(s, 0xEE)};
  }
  // Broadcast word j (0..7) of each 128-bit half.
  static PLLM_AI __m256i word(__m256i v, int j) { return _mm256_shuffle_epi8(v, _mm256_set1_epi16(short(0x0100 + 0x0202 * j))); }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int h = u / 4, k = u % 4;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(load256(w->ql + 64 * h + 32 * (k & 1)), 4 * (k >> 1)), m4);
    // qh bits 2k, 2k + 1 moved to bits 4, 5 by one shift (16-bit lanes; the mask drops what
    // crosses from the neighbouring byte).
    const __m256i qh = load256(w->qh + 32 * h);
    const __m256i hs = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2) : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
    const __m256i hb = _mm256_and_si256(hs, _mm256_set1_epi8(0x30));
    const __m256i c = _mm256_sub_epi8(_mm256_or_si256(lo, hb), _mm256_set1_epi8(32));
    const __m256i& s = h == 0 ? g.s07 : g.s8f;  // scales 2u, 2u + 1 = words 2k, 2k + 1 of s
    q.lo = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(c)), word(s, 2 * k));
    q.hi = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(c, 1)), word(s, 2 * k + 1));
  }
  static PLLM_AI __m256 scale(const G& g, int) { return g.d; }
  static PLLM_AI __m256 min(const G&, int) { return _mm256_setzero_ps(); }
};


// Q5_K: Q4_K's nibbles | bit u of qh[l] << 4 (0..31).
struct MQ5_K : Groups::Q5_K {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    const uint8_t* p = w->qs + 32 * (u / 2);
    const __m256i a = _mm256_cvtepu8_epi16(load128(p)), c = _mm256_cvtepu8_epi16(load128(p + 16));
    const __m256i m4 = _mm256_set1_epi16(0x0F), one = _mm256_set1_epi16(1);
    const __m128i sh = _mm_cvtsi32_si128(u);
    const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(_mm256_cvtepu8_epi16(load128(w->qh)), sh), one);
    const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(_mm256_cvtepu8_epi16(load128(w->qh + 16)), sh), one);
    const __m256i lo = (u & 1) ? _mm256_srli_epi16(a, 4) : _mm256_and_si256(a, m4);
    const __m256i hi = (u & 1) ? _mm256_srli_epi16(c, 4) : _mm256_and_si256(c, m4);
    q.lo = _mm256_or_si256(lo, _mm256_slli_epi16(h0, 4));
    q.hi = _mm256_or_si256(hi, _mm256_slli_epi16(h1, 4));
  }
};

// IQ4: the levels of 16 packed bytes (element order) as int16 codes, by one byte shuffle.
PLLM_AI void iq4_codes(const uint8_t* qs, Q& q) {
  const __m128i b = load128(qs), m4 = _mm_set1_epi8(0x0F);
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
  q.lo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(t, _mm_and_si128(b, m4)));
  q.hi = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(b, 4), m4)));
}

struct MIQ4_NL : Groups::IQ4_NL {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { iq4_codes(w[u].qs, q); }
};

struct MIQ4_XS : Groups::IQ4_XS {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { iq4_codes(w->qs + 16 * u, q); }
};

// Q3_K unit u = 4 h + j: q = (bits 2j of qs[32 h + l] | bit u of hmask[l] << 2) - 4, its two
// sub-blocks' signed scales folded in as Q6_K's (|code| <= 4 * 32); x = d * code.
struct MQ3_K : Rows1 {
  using W = block_q3_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  struct G { __m256 d; __m256i s07, s8f; };
  static PLLM_AI G group(const W* w, int) {
    alignas(16) int8_t sc[16];
    unpack_k3_scales(w->scales, sc);
    const __m256i s = _mm256_cvtepi8_epi16(load128(sc));
    return {avx2::bcast_h(w->d), _mm256_permute4x64_epi64(s, 0x44), _mm256_permute4x64_epi64(s, 0xEE)};
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int h = u / 4, j = u % 4;
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(load256(w->qs + 32 * h), _mm_cvtsi32_si128(2 * j)),
                                        _mm256_set1_epi8(3));
    const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(load256(w->hmask), _mm_cvtsi32_si128(u)), _mm256_set1_epi8(1));
    const __m256i c = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hb, 2)), _mm256_set1_epi8(4));
    const __m256i& s = h == 0 ? g.s07 : g.s8f;  // scales 2u, 2u + 1 = words 2j, 2j + 1 of s
    q.lo = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(c)), MQ6_K::word(s, 2 * j));
    q.hi = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(c, 1)), MQ6_K::word(s, 2 * j + 1));
  }
  static PLLM_AI __m256 scale(const G& g, int) { return g.d; }
  static PLLM_AI __m256 min(const G&, int) { return _mm256_setzero_ps(); }
};

// Q2_K unit u = 4 h + j: q = bits 2j of qs[32 h + l] times the low nibble of scales[2u] (the
// unit's elements 0-15) or scales[2u + 1] (16-31), folded in as Q6_K's (code <= 45); x = d * code
// plus the two mins of the unit (kHalfMin, drivers/i16_tile.h), the scale bytes' high nibbles.
struct MQ2_K : Rows1 {
  using W = block_q2_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = true, kHalfMin = true;
  struct G { Groups::Q2KFactors f; __m256i s07, s8f; };
  static PLLM_AI G group(const W* w, int) {
    const __m256i s = _mm256_cvtepu8_epi16(_mm_and_si128(load128(w->scales), _mm_set1_epi8(0x0F)));
    return {Groups::q2k_factors(w), _mm256_permute4x64_epi64(s, 0x44), _mm256_permute4x64_epi64(s, 0xEE)};
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int h = u / 4, j = u % 4;
    const __m256i c = _mm256_and_si256(_mm256_srl_epi16(load256(w->qs + 32 * h), _mm_cvtsi32_si128(2 * j)),
                                       _mm256_set1_epi8(3));
    const __m256i& s = h == 0 ? g.s07 : g.s8f;  // scales 2u, 2u + 1 = words 2j, 2j + 1 of s
    q.lo = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(c)), MQ6_K::word(s, 2 * j));
    q.hi = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(c, 1)), MQ6_K::word(s, 2 * j + 1));
  }
  static PLLM_AI __m256 scale(const G& g, int) { return g.f.d; }
  static PLLM_AI __m256 min(const G& g, int) { return g.f.mn; }
  static PLLM_AI __m256 min2(const G& g, int) { return g.f.mn2; }
};

// ------------------------------------------------------------------ panel traits
// drivers/i16_panels.h: two ymm per panel vector, rows 0-7 and 8-15, against a broadcast
// activation pair; the pair product (dp) and the f32 operations are the GEMM's.
struct P256 : T256 {
  static constexpr int kVecs = 2;
  // 8 int32 accumulators in the 16 registers (the code vectors are memory operands): 4 rows of
  // one chain per unit, or 2 rows of two halves. One or two rows split their chains so the
  // dependent vpmaddwd + vpaddd latency does not bound a decode step.
  static constexpr int tile_x(bool one) { return one ? 4 : 2; }
  static constexpr int chains(int nx) { return nx == 1 ? 4 : nx == 2 ? 2 : 1; }
  // A pair product's accumulation is a vpaddd (latency 1): few chains suffice, and they leave
  // registers for decoding (4 per half measured the same on one Zen 4 core, bench_kernels avx2
  // i16_panels/1: within 4 % on Q4_0, Q4_K, Q6_K, Q8_0).
  static constexpr int dot1_chains(bool one) { return one ? 2 : 1; }
  static PLLM_AI V loadb(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static PLLM_AI V ctl(const int8_t* c) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(c)); }
  static PLLM_AI V shuffle(V b, V c) { return _mm256_shuffle_epi8(b, c); }
  static PLLM_AI V low4(V w) { return _mm256_and_si256(w, _mm256_set1_epi16(0x0F)); }
  static PLLM_AI V shr4(V w) { return _mm256_srli_epi16(w, 4); }
  static PLLM_AI V sar8(V w) { return _mm256_srai_epi16(w, 8); }
  static PLLM_AI V flip(V b) { return _mm256_xor_si256(b, _mm256_set1_epi8(-128)); }
  static PLLM_AI V nib_lo(V b) { return _mm256_and_si256(b, _mm256_set1_epi8(0x0F)); }
  static PLLM_AI V nib_hi(V b) { return _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(0x0F)); }
  static PLLM_AI V izero() { return _mm256_setzero_si256(); }
  static PLLM_AI V iadd(V a, V b) { return _mm256_add_epi32(a, b); }
  static PLLM_AI VF zero() { return _mm256_setzero_ps(); }
  static PLLM_AI VF loadu(const float* p) { return _mm256_loadu_ps(p); }
  static PLLM_AI void storeu(float* p, VF v) { _mm256_storeu_ps(p, v); }
  static PLLM_AI VF scales(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static PLLM_AI VF u8f(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static PLLM_AI VF sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
  static PLLM_AI V i8i(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static PLLM_AI V mul32(V a, V b) { return _mm256_mullo_epi32(a, b); }
  // Q6_K: word operations.
  static PLLM_AI V bcast16(const uint8_t* p) { return _mm256_broadcastsi128_si256(load128(p)); }
  template <int N>
  static PLLM_AI V sllw(V w) { return _mm256_slli_epi16(w, N); }
  template <int N>
  static PLLM_AI V srlw(V w) { return _mm256_srli_epi16(w, N); }
  static PLLM_AI V orhi(V a, V b) { return _mm256_or_si256(a, _mm256_and_si256(b, _mm256_set1_epi16(0x30))); }
  static PLLM_AI V or16(V a, V b) { return _mm256_or_si256(a, _mm256_and_si256(b, _mm256_set1_epi16(0x10))); }
  static PLLM_AI V subw(V a, V b) { return _mm256_sub_epi16(a, b); }
  static PLLM_AI V band(V a, V b) { return _mm256_and_si256(a, b); }
  static PLLM_AI V bor(V a, V b) { return _mm256_or_si256(a, b); }
  static PLLM_AI V mulw(V a, V b) { return _mm256_mullo_epi16(a, b); }
  static PLLM_AI V bcastw(int16_t x) { return _mm256_set1_epi16(x); }
};

// ------------------------------------------------------------------ table entries
// The tile (traits S) and the prefill GEMM (traits T) of every type these micro-kernels cover.
template <class S, class T, class M>
PLLM_AI void set_i16(TypeKernels& k) {
  k.vec_dot_i16act_tile = drivers::i16_tile_inlined<S, M>;
  k.gemm_i16 = drivers::i16_gemm<T, M>;
}

template <class S, class T>
void fill_i16_tiles(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  set_i16<S, T, MQ4_0>(at(TensorType::Q4_0));
  set_i16<S, T, MQ4_1>(at(TensorType::Q4_1));
  set_i16<S, T, MQ5_0>(at(TensorType::Q5_0));
  set_i16<S, T, MQ5_1>(at(TensorType::Q5_1));
  set_i16<S, T, MQ8_0>(at(TensorType::Q8_0));
  set_i16<S, T, MQ4_K>(at(TensorType::Q4_K));
  set_i16<S, T, MQ6_K>(at(TensorType::Q6_K));
  set_i16<S, T, MQ3_K>(at(TensorType::Q3_K));
  set_i16<S, T, MQ5_K>(at(TensorType::Q5_K));
  set_i16<S, T, MIQ4_NL>(at(TensorType::IQ4_NL));
  set_i16<S, T, MIQ4_XS>(at(TensorType::IQ4_XS));
  // Q2_K: the tile only (drivers/i16_gemm.h has no kHalfMin); its prefill runs panels or the tile.
  at(TensorType::Q2_K).vec_dot_i16act_tile = drivers::i16_tile_inlined<S, MQ2_K>;
}

// gemm_i16_panels of the panel types, with panel traits P.
template <class P>
void fill_i16_panels(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ4_0>;
  t.types[int(TensorType::Q4_1)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ4_1>;
  t.types[int(TensorType::Q8_0)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ8_0>;
  t.types[int(TensorType::Q4_K)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ4_K>;
  t.types[int(TensorType::Q6_K)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ6_K>;
  t.types[int(TensorType::Q5_K)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ5_K>;
  t.types[int(TensorType::IQ4_NL)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelIQ4_NL>;
  t.types[int(TensorType::Q3_K)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ3_K>;
  t.types[int(TensorType::IQ4_XS)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelIQ4_XS>;
  t.types[int(TensorType::Q2_K)].gemm_i16_panels = drivers::i16_panels<P, drivers::PanelQ2_K>;
}

}  // namespace

}  // namespace pllm::kern
