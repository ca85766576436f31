// int16 activations on AVX-512 (F/BW/VL): TypeKernels::vec_dot_i16act_tile for Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q4_K, Q6_K, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS in the avx512 table, filled after i16act_avx2.cpp (whose
// quantize_row_q16 the table keeps). Compiled with the AVX-512 flags (see simd_avx512.h). The
// tile loop is drivers/i16_tile.h; this file holds the vector traits and one micro-kernel per
// weight type, as x86/i16_avx2.h, whose f32 part (F = __m256, lane j = unit j, the per-group
// scale and min vectors) is the same: drivers/i16_groups.h.
//
// The integer part is 512-bit: a unit's 32 codes are one zmm of words, so its dot is one
// vpmaddwd (AVX2: two and an add), and the transposing add tree of a group runs on 16 int32
// lanes per unit (about 32 vector instructions per group and activation row where AVX2 needs
// 47). It ends in AVX2's two halves per unit (elements 0-7 and 16-23; 8-15 and 24-31: 16
// products each), converted to f32 and added: every result is the avx2 table's bit for bit
// (tests/cpp/test_i16act.cpp checks it), Q6_K included, whose halves may exceed 2^24 and round
// in the conversion. VNNI's vpdpwssd is not used: a unit's dot is one vpmaddwd with nothing to
// add to it, and every add of the tree joins lanes of different units, which a fused
// multiply-add cannot express. (A tree of blends and one two-source permute per join, half the
// shuffles, measured 3-8 % slower.)
//
// Measured on Zen 5 (bench_kernels, one thread, 576x1536 and 1536x576): 1.03-1.6x the speed of
// the AVX2 tiles at one activation row, 1.26-1.54x at 4 and 1.3-1.7x at 8, every type.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/drivers/i16_gemm.h"
#include "kernels/drivers/i16_groups.h"
#include "kernels/drivers/i16_tile.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx512.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

PLLM_AI __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
PLLM_AI __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// ------------------------------------------------------------------ driver traits
struct S512 {
  using F = __m256;
  using I = __m512i;
  using Q = __m512i;  // a unit's 32 codes as words, in element order
  static constexpr int kLanes = 8;
  static PLLM_AI F zero() { return _mm256_setzero_ps(); }
  static PLLM_AI I izero() { return _mm512_setzero_si512(); }
  static PLLM_AI F load(const float* p) { return _mm256_loadu_ps(p); }
  static PLLM_AI F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI F fma(F acc, F a, F b) { return _mm256_fmadd_ps(a, b, acc); }
  // avx2::hsum's order (the f32 sums must be the avx2 table's).
  static PLLM_AI float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Lane i: elements 2i, 2i + 1 (2 products); 128-bit lane k: elements 8k..8k+7.
  static PLLM_AI I dot(const Q& q, const int16_t* a) { return _mm512_madd_epi16(q, _mm512_loadu_si512(a)); }
  static PLLM_AI void prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }
  // The add tree, AVX2's within each 128-bit lane: join1(u0, u1) = (u0 02, u1 02, u0 13, u1 13)
  // (4 products per lane); join2 of two = (u0, u1, u2, u3), each unit's sum over the 128-bit
  // lane's 8 elements (8 products).
  static PLLM_AI I join1(I a, I b) { return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b)); }
  static PLLM_AI I join2(I a, I b) { return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b)); }
  // 128-bit lanes x = (X0 X1 X2 X3) of units 0-3, y of units 4-7: AVX2's halves are lanes 0 + 2
  // and 1 + 3. (X0 Y0 X1 Y1) + (X2 Y2 X3 Y3) = (halves A of units 0-7 | halves B), 16 products
  // per lane (the most an int32 lane may hold); converted, then the halves added in f32.
  static PLLM_AI void totals(I x, I y, F t[1]) {
    const __m512i a = _mm512_permutex2var_epi64(x, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), y);
    const __m512i b = _mm512_permutex2var_epi64(x, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), y);
    const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(a, b));
    t[0] = _mm256_add_ps(_mm512_castps512_ps256(f), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
  }
};
using Q = S512::Q;

// The prefill GEMM's traits (drivers/i16_gemm.h): lane i = weight row i, 2 x 16 rows x 4
// activation rows per register tile (16 int32 halves, 2 code vectors and a broadcast).
struct T512 {
  static constexpr int kLanes = 16, kRowVecs = 2, kTileX = 4;
  using V = __m512i;
  using VF = __m512;
  using Q = S512::Q;
  static PLLM_AI V pair(const int16_t* a) {
    int32_t v;
    std::memcpy(&v, a, 4);
    return _mm512_set1_epi32(v);
  }
  static PLLM_AI V load(const int32_t* p) { return _mm512_load_si512(p); }
  static PLLM_AI V madd(V w, const int16_t* a) { return _mm512_madd_epi16(w, pair(a)); }
  static PLLM_AI V dp(V acc, V w, const int16_t* a) { return _mm512_dpwssd_epi32(acc, w, pair(a)); }
  static PLLM_AI VF cvt(V v) { return _mm512_cvtepi32_ps(v); }
  static PLLM_AI VF add(VF a, VF b) { return _mm512_add_ps(a, b); }
  static PLLM_AI VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static PLLM_AI VF fma(VF acc, VF a, VF b) { return _mm512_fmadd_ps(a, b, acc); }
  static PLLM_AI VF loadf(const float* p) { return _mm512_load_ps(p); }
  static PLLM_AI void storef(float* p, VF v) { _mm512_store_ps(p, v); }
  static PLLM_AI VF bcast(float f) { return _mm512_set1_ps(f); }
  // 16 x 16 dwords in 64 shuffles: 32-bit, then 64-bit unpacks, then two rounds of 128-bit
  // lane shuffles.
  static PLLM_AI void transpose(const int32_t* src, int32_t* dst, int ds) {
    __m512i r[16], t[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(src + 16 * i);
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
      r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
      r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
      r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
      r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) {
        t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
        t[8 * i + j + 4] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + j + 4], 0xdd);
      }
    for (int j = 0; j < 8; ++j) {
      _mm512_store_si512(dst + j * ds, _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88));
      _mm512_store_si512(dst + (j + 8) * ds, _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd));
    }
  }
};

// ------------------------------------------------------------------ micro-kernels
// 32-element blocks: a group is 8 consecutive blocks; its fp16 field at byte `off` of each of
// the first nu blocks as 8 f32 lanes (0 beyond nu). A whole group by two vpermt2w over 128-byte
// windows inside it (blocks 0-3 from its first 128 bytes, 4-7 from one that ends by the group's
// end); a row's short last group by scalar loads, as i16_avx2.h gathers every group (it
// reads nothing beyond the row). The vector way measured 6-12 % faster at one activation row.
template <class W>
PLLM_AI __m256 gather_h(const W* w, int nu, int off) {
  constexpr int B = int(sizeof(W));
  static_assert(B % 2 == 0 && 8 * B >= 128);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(w);
  if (nu == 8) {
    constexpr int s = 4 * B < 8 * B - 128 ? 4 * B : 8 * B - 128;  // the second window
    const short o = short(off / 2);
    const __m512i i0 = _mm512_zextsi128_si512(_mm_setr_epi16(o, B / 2 + o, B + o, 3 * B / 2 + o, 0, 0, 0, 0));
    const __m512i i1 = _mm512_zextsi128_si512(_mm_setr_epi16(0, 0, 0, 0, (4 * B - s) / 2 + o, (5 * B - s) / 2 + o,
                                                             (6 * B - s) / 2 + o, (7 * B - s) / 2 + o));
    const __m512i h0 = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), i0, _mm512_loadu_si512(p + 64));
    const __m512i h1 = _mm512_permutex2var_epi16(_mm512_loadu_si512(p + s), i1, _mm512_loadu_si512(p + s + 64));
    return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_mask_blend_epi16(0xF0, h0, h1)));
  }
  uint64_t q[2] = {0, 0};
  for (int i = 0; i < nu; ++i) {
    uint16_t h;
    std::memcpy(&h, p + i * B + off, 2);
    q[i / 4] |= uint64_t(h) << (16 * (i % 4));
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(q[1]), static_cast<long long>(q[0])));
}

// The group operations of drivers/i16_groups.h: 8 f32 lanes, lane j = block or unit j.
struct Group256 {
  using F = __m256;
  template <class W>
  static PLLM_AI F gather_h(const W* w, int nu, int off) { return kern::gather_h(w, nu, off); }
  // An fp16 scale broadcast to 8 f32 lanes (as avx2::bcast_h).
  static PLLM_AI F bcast_h(const uint16_t& h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }
  static PLLM_AI F u8_to_f(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static PLLM_AI F set1(float x) { return _mm256_set1_ps(x); }
  static PLLM_AI F zero() { return _mm256_setzero_ps(); }
  static PLLM_AI F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static PLLM_AI F sub(F a, F b) { return _mm256_sub_ps(a, b); }
};

// The 4-bit q of a block in element order: its 16 bytes in both 256-bit halves, widened to
// words (each holding both nibbles); the high nibbles shifted down in words 16-31.
PLLM_AI Q nibbles(const uint8_t* qs) {
  const __m512i v = _mm512_cvtepu8_epi16(_mm256_broadcastsi128_si256(load128(qs)));
  return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFFFF0000u, v, 4), _mm512_set1_epi16(0x0F));
}

// q = nibble | fifth bit << 4 (0..31): the 32 bits of qh are a word mask (bit j: element j).
PLLM_AI Q q5_codes(const uint8_t* qh, const uint8_t* qs) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const Q q = nibbles(qs);
  return _mm512_mask_add_epi16(q, _cvtu32_mask32(h), q, _mm512_set1_epi16(16));
}

// Register tiles: two weight rows share each activation load and d_a up to 4 activation rows
// (the 32 registers hold the tree states of 2 x 4 pairs; 4-10 % faster at 4 than one row, 6 %
// at 1 for Q6_K too), one row beyond (two spill: up to 15 % slower at 8).
struct Rows {
  static constexpr int tile_rows(int nx) { return nx <= 4 ? 2 : 1; }
};

// The scale halves (drivers/i16_groups.h, the avx2 level's); the codes below.
using Groups = drivers::I16Groups<Group256, Rows>;

struct MQ4_0 : Groups::Q4_0 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = nibbles(w[u].qs); }
};

struct MQ4_1 : Groups::Q4_1 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = nibbles(w[u].qs); }
};

struct MQ5_0 : Groups::Q5_0 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = q5_codes(w[u].qh, w[u].qs); }
};

struct MQ5_1 : Groups::Q5_1 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = q5_codes(w[u].qh, w[u].qs); }
};

struct MQ8_0 : Groups::Q8_0 {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = _mm512_cvtepi8_epi16(load256(w[u].qs)); }
};

// Unit j's codes: the low nibbles of the 32-byte group j / 2 for even j, high for odd.
struct MQ4_K : Groups::Q4_K {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    const __m512i v = _mm512_cvtepu8_epi16(load256(w->qs + 32 * (u / 2)));
    q = u & 1 ? _mm512_srli_epi16(v, 4) : _mm512_and_si512(v, _mm512_set1_epi16(0x0F));
  }
};

// Unit u = 4 h + k (128-element half h, quarter k): q = (4 bits of ql | 2 bits of qh << 4) - 32
// with sc[2u] for its first 16 elements and sc[2u + 1] for the rest, folded into the codes
// (|code| <= 32 * 128); x = d * code. Decoded as 32 bytes, widened, times the unit's two scales
// spread over words 0-15 and 16-31 by one vpermw.
struct MQ6_K : Rows {
  using W = block_q6_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  struct G { __m256 d; __m512i sc; };  // sc: the 16 scales as words 0-15
  static PLLM_AI G group(const W* w, int) {
    return {Group256::bcast_h(w->d), _mm512_castsi256_si512(_mm256_cvtepi8_epi16(load128(w->scales)))};
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int h = u / 4, k = u % 4;
    const __m256i ql = load256(w->ql + 64 * h + 32 * (k & 1));
    const __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    // qh bits 2k, 2k + 1 moved to bits 4, 5 by one shift (16-bit lanes; the mask drops what
    // crosses from the neighbouring byte), or'ed in by one vpternlogd (lo | hs & 0x30).
    const __m256i qh = load256(w->qh + 32 * h);
    const __m256i hs = k == 0   ? _mm256_slli_epi16(qh, 4)
                       : k == 1 ? _mm256_slli_epi16(qh, 2)
                       : k == 2 ? qh
                                : _mm256_srli_epi16(qh, 2);
    const __m256i c8 = _mm256_ternarylogic_epi32(lo, hs, _mm256_set1_epi8(0x30), 0xF8);
    const __m256i c = _mm256_sub_epi8(c8, _mm256_set1_epi8(32));
    const __m512i idx =  // words 0-15: scale 2u, 16-31: 2u + 1
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(short(2 * u)), _mm512_set1_epi16(short(2 * u + 1)));
    q = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(c), _mm512_permutexvar_epi16(idx, g.sc));
  }
  static PLLM_AI __m256 scale(const G& g, int) { return g.d; }
  static PLLM_AI __m256 min(const G&, int) { return _mm256_setzero_ps(); }
};

// Q5_K: Q4_K's nibbles plus 16 where bit u of qh[l] is set (a word mask: each byte's bit u
// moved to its top by one word shift, which carries nothing across bytes up there).
struct MQ5_K : Groups::Q5_K {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) {
    const __m512i v = _mm512_cvtepu8_epi16(load256(w->qs + 32 * (u / 2)));
    const Q lo = u & 1 ? _mm512_srli_epi16(v, 4) : _mm512_and_si512(v, _mm512_set1_epi16(0x0F));
    const uint32_t h = uint32_t(_mm256_movemask_epi8(_mm256_sll_epi16(load256(w->qh), _mm_cvtsi32_si128(7 - u))));
    q = _mm512_mask_add_epi16(lo, _cvtu32_mask32(h), lo, _mm512_set1_epi16(16));
  }
};

// The IQ4 levels of 16 packed bytes (element order) as words.
PLLM_AI Q iq4_codes(const uint8_t* qs) {
  const __m128i b = load128(qs), m4 = _mm_set1_epi8(0x0F);
  const __m128i t = load128(kIq4nlValues);
  const __m256i lv = _mm256_set_m128i(_mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                                      _mm_shuffle_epi8(t, _mm_and_si128(b, m4)));
  return _mm512_cvtepi8_epi16(lv);
}

struct MIQ4_NL : Groups::IQ4_NL {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = iq4_codes(w[u].qs); }
};

struct MIQ4_XS : Groups::IQ4_XS {
  static PLLM_AI void codes(const W* w, const G&, int u, Q& q) { q = iq4_codes(w->qs + 16 * u); }
};

// Q3_K unit u = 4 h + j: q = (bits 2j of qs[32 h + l] | bit u of hmask[l] << 2) - 4, times its
// two sub-blocks' signed scales as MQ6_K's (|code| <= 4 * 32); x = d * code.
struct MQ3_K : Rows {
  using W = block_q3_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = false;
  struct G { __m256 d; __m512i sc; };  // sc: the 16 scales as words 0-15
  static PLLM_AI G group(const W* w, int) {
    alignas(16) int8_t sc[16];
    unpack_k3_scales(w->scales, sc);
    return {Group256::bcast_h(w->d), _mm512_castsi256_si512(_mm256_cvtepi8_epi16(load128(sc)))};
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int h = u / 4, j = u % 4;
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(load256(w->qs + 32 * h), _mm_cvtsi32_si128(2 * j)),
                                        _mm256_set1_epi8(3));
    const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(load256(w->hmask), _mm_cvtsi32_si128(u)), _mm256_set1_epi8(1));
    const __m256i c = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hb, 2)), _mm256_set1_epi8(4));
    const __m512i idx =  // words 0-15: scale 2u, 16-31: 2u + 1
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(short(2 * u)), _mm512_set1_epi16(short(2 * u + 1)));
    q = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(c), _mm512_permutexvar_epi16(idx, g.sc));
  }
  static PLLM_AI __m256 scale(const G& g, int) { return g.d; }
  static PLLM_AI __m256 min(const G&, int) { return _mm256_setzero_ps(); }
};

// Q2_K unit u = 4 h + j: q = bits 2j of qs[32 h + l] times the low nibble of scales[2u] (elements
// 0-15) or scales[2u + 1] (16-31) as x86/i16_avx2.h's MQ2_K (code <= 45); x = d * code and the
// unit's two mins (kHalfMin).
struct MQ2_K : Rows {
  using W = block_q2_K;
  static constexpr int kUnits = 8;
  static constexpr bool kMin = true, kHalfMin = true;
  struct G { Groups::Q2KFactors f; __m512i sc; };  // sc: the 16 low nibbles as words 0-15
  static PLLM_AI G group(const W* w, int) {
    const __m128i s = _mm_and_si128(load128(w->scales), _mm_set1_epi8(0x0F));
    return {Groups::q2k_factors(w), _mm512_castsi256_si512(_mm256_cvtepu8_epi16(s))};
  }
  static PLLM_AI void codes(const W* w, const G& g, int u, Q& q) {
    const int h = u / 4, j = u % 4;
    const __m256i c = _mm256_and_si256(_mm256_srl_epi16(load256(w->qs + 32 * h), _mm_cvtsi32_si128(2 * j)),
                                       _mm256_set1_epi8(3));
    const __m512i idx =  // words 0-15: scale 2u, 16-31: 2u + 1
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(short(2 * u)), _mm512_set1_epi16(short(2 * u + 1)));
    q = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(c), _mm512_permutexvar_epi16(idx, g.sc));
  }
  static PLLM_AI __m256 scale(const G& g, int) { return g.f.d; }
  static PLLM_AI __m256 min(const G& g, int) { return g.f.mn; }
  static PLLM_AI __m256 min2(const G& g, int) { return g.f.mn2; }
};

}  // namespace

void fill_i16act_avx512(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  at(TensorType::Q4_0).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ4_0>;
  at(TensorType::Q4_1).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ4_1>;
  at(TensorType::Q5_0).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ5_0>;
  at(TensorType::Q5_1).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ5_1>;
  at(TensorType::Q8_0).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ8_0>;
  at(TensorType::Q4_K).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ4_K>;
  at(TensorType::Q6_K).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ6_K>;
  at(TensorType::Q4_0).gemm_i16 = drivers::i16_gemm<T512, MQ4_0>;
  at(TensorType::Q4_1).gemm_i16 = drivers::i16_gemm<T512, MQ4_1>;
  at(TensorType::Q5_0).gemm_i16 = drivers::i16_gemm<T512, MQ5_0>;
  at(TensorType::Q5_1).gemm_i16 = drivers::i16_gemm<T512, MQ5_1>;
  at(TensorType::Q8_0).gemm_i16 = drivers::i16_gemm<T512, MQ8_0>;
  at(TensorType::Q4_K).gemm_i16 = drivers::i16_gemm<T512, MQ4_K>;
  at(TensorType::Q6_K).gemm_i16 = drivers::i16_gemm<T512, MQ6_K>;
  // llama.cpp's low-bit types (Q2_K: the tile only, as x86/i16_avx2.h)
  at(TensorType::Q2_K).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ2_K>;
  at(TensorType::Q3_K).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ3_K>;
  at(TensorType::Q5_K).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MQ5_K>;
  at(TensorType::IQ4_NL).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MIQ4_NL>;
  at(TensorType::IQ4_XS).vec_dot_i16act_tile = drivers::i16_tile_inlined<S512, MIQ4_XS>;
  at(TensorType::Q3_K).gemm_i16 = drivers::i16_gemm<T512, MQ3_K>;
  at(TensorType::Q5_K).gemm_i16 = drivers::i16_gemm<T512, MQ5_K>;
  at(TensorType::IQ4_NL).gemm_i16 = drivers::i16_gemm<T512, MIQ4_NL>;
  at(TensorType::IQ4_XS).gemm_i16 = drivers::i16_gemm<T512, MIQ4_XS>;
}

}  // namespace pllm::kern
