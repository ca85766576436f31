// AVX2 + FMA + F16C kernels of the types read from llama.cpp's files: Q2_K, Q3_K, Q5_K, IQ4_NL,
// IQ4_XS. Exact mode (drivers::set_exact over the decoders below: one-row, multi-row, batched
// decode and the prefill GEMM) and the int8 one-row dots (Q8_K activations; Q8_0 for IQ4_NL),
// which the table's loops (generic/dot_loops.cpp) turn into the multi-row, batched and GEMM
// entries. Used by the avx2, avxvnni and avx512 tables (the avx512 table has no one-row kernels
// of its own for these types). Their int16 tiles and GEMMs are in x86/i16_avx2.h and
// x86/i16act_avx512.cpp with the other types'.
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/block_dot.h"
#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"
#include "kernels/x86/decode_avx2.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

using namespace avx2;  // h2f, hsum, zx8, bcast_h, F32x8 (simd_avx2.h)

PLLM_AI __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
PLLM_AI __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// The IQ4 levels as a byte shuffle table (16 entries, both 128-bit halves).
PLLM_AI __m128i iq4_table() { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)); }

// The 32 levels of 16 packed bytes (element order: low nibbles, then high) as int8.
PLLM_AI __m256i iq4_levels32(const uint8_t* qs) {
  const __m128i b = load128(qs), m4 = _mm_set1_epi8(0x0F), t = iq4_table();
  return _mm256_set_m128i(_mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                          _mm_shuffle_epi8(t, _mm_and_si128(b, m4)));
}

// Levels (int8) of a unit -> 4 x 8 floats times ds (exact: 11 + 6 + 7 bits).
PLLM_AI void store_levels(__m256i lv, __m256 ds, __m256 v[4]) {
  const __m128i lo = _mm256_castsi256_si128(lv), hi = _mm256_extracti128_si256(lv, 1);
  v[0] = _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)));
  v[1] = _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))));
  v[2] = _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)));
  v[3] = _mm256_mul_ps(ds, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))));
}

// ------------------------------------------------------------ exact-mode decoders
// Q5_K: Q4_K's nibble (low for even units, high for odd) | bit u of qh[l] << 4; x = fma(q, d sc,
// -dmin m), rounding as the reference's (d sc) q - dmin m (the product is exact).
struct DecQ5_K : drivers::Q5KRow<F32x8> {
  using Q5KRow::Q5KRow;
  PLLM_AI void unit(int u, __m256 v[4]) {
    const uint8_t* p = q + 32 * (u / 2);
    const __m256 ds = _mm256_set1_ps(dsc[u]), m = _mm256_set1_ps(mn[u]);
    const __m256i one = _mm256_set1_epi32(1);
    for (int k = 0; k < 4; ++k) {
      const __m256i a = zx8(p + 8 * k);
      const __m256i lo = (u & 1) ? _mm256_srli_epi32(a, 4) : _mm256_and_si256(a, _mm256_set1_epi32(0x0F));
      const __m256i hb = _mm256_and_si256(_mm256_srli_epi32(zx8(blk->qh + 8 * k), u), one);
      v[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_or_si256(lo, _mm256_slli_epi32(hb, 4))), ds, m);
    }
  }
};

// Q2_K unit u = 4 h + j: bits 2j of qs[32 h + l]; sub-blocks 2u (l < 16) and 2u + 1.
struct DecQ2_K : drivers::Q2KRow<F32x8> {
  using Q2KRow::Q2KRow;
  PLLM_AI void unit(int u, __m256 v[4]) {
    const uint8_t* p = blk->qs + 32 * (u / 4);
    const int sh = 2 * (u % 4);
    for (int k = 0; k < 4; ++k) {
      const __m256i qi = _mm256_and_si256(_mm256_srli_epi32(zx8(p + 8 * k), sh), _mm256_set1_epi32(3));
      const int i = 2 * u + k / 2;
      v[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qi), _mm256_set1_ps(dsc[i]), _mm256_set1_ps(mn[i]));
    }
  }
};

// Q3_K unit u = 4 h + j: Q2_K's two bits, minus 4 where bit u of hmask[l] is clear.
struct DecQ3_K : drivers::Q3KRow<F32x8> {
  using Q3KRow::Q3KRow;
  PLLM_AI void unit(int u, __m256 v[4]) {
    const uint8_t* p = blk->qs + 32 * (u / 4);
    const int sh = 2 * (u % 4);
    const __m256i one = _mm256_set1_epi32(1), three = _mm256_set1_epi32(3), four = _mm256_set1_epi32(4);
    for (int k = 0; k < 4; ++k) {
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(zx8(p + 8 * k), sh), three);
      const __m256i hb = _mm256_and_si256(_mm256_srli_epi32(zx8(blk->hmask + 8 * k), u), one);
      const __m256i qi = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hb, 2)), four);
      v[k] = _mm256_mul_ps(_mm256_set1_ps(ds[2 * u + k / 2]), _mm256_cvtepi32_ps(qi));
    }
  }
};

struct DecIQ4_NL : drivers::BlockRow<F32x8, block_iq4_nl> {
  static constexpr int kUnits = 1;
  const uint8_t* q = nullptr;
  __m256 d;
  using BlockRow::BlockRow;
  PLLM_AI void block(int64_t b) {
    q = w[b].qs;
    d = bcast_h(w[b].d);
  }
  PLLM_AI void unit(int, __m256 v[4]) { store_levels(iq4_levels32(q), d, v); }
};

struct DecIQ4_XS : drivers::IQ4XSRow<F32x8> {
  using IQ4XSRow::IQ4XSRow;
  PLLM_AI void unit(int u, __m256 v[4]) { store_levels(iq4_levels32(blk->qs + 16 * u), _mm256_set1_ps(ds[u]), v); }
};

// ------------------------------------------------------------ int8 dots
// u8 x s8 products summed over 4 adjacent bytes per i32 lane (callers keep |u8| * 127 * 2 <= 32767).
PLLM_AI __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// s8 x s8 by the sign trick (y != -128: activations are within +-127).
PLLM_AI __m256i dot_s8s8(__m256i x, __m256i y) { return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

// The bytes of a 32-byte vector shifted right by n within each byte, masked to m.
PLLM_AI __m256i bits8(__m256i v, int n, int m) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(n)), _mm256_set1_epi8(static_cast<char>(m)));
}

// sum_u sc * (u8 codes . a) for one 32-element unit whose two 16-element halves have the int16
// scales s (low 128 bits: the first half's scale in every word, high: the second's).
PLLM_AI __m256i dot_scaled(__m256i codes, const int8_t* a, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, load256(a)), s);
}
PLLM_AI __m256i scale_pair(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(hi)), _mm_set1_epi16(static_cast<short>(lo)));
}

// accm + dmin * (bsums . mins): a super-block's min term, mins as int16 per 16-element bsum.
PLLM_AI __m256 fold_mins(__m256 accm, float dmin, const int16_t* bsums, __m256i mins) {
  return _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(load256(bsums), mins)), accm);
}

float vec_dot_q5_K(int64_t n, const void* w_row, const void* xq) {
  const block_q5_K* w = static_cast<const block_q5_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    alignas(16) uint8_t sm[16];
    unpack_k4_scales(w[b].scales, sm);
    const float d = h2f(w[b].d) * a[b].d, dmin = h2f(w[b].dmin) * a[b].d;
    // mins: m_j * (bsums[2j] + bsums[2j+1]) in i32 lane j (as Q4_K)
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    accm = fold_mins(accm, dmin, a[b].bsums, mins);
    const __m256i qh = load256(w[b].qh);
    __m256i sumi = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i q4 = load256(w[b].qs + 32 * p);
      // q (0..31) times s8: 31 * 127 * 2 < 32767, maddubs cannot saturate
      const __m256i lo = _mm256_or_si256(bits8(q4, 0, 0x0F), _mm256_slli_epi16(bits8(qh, 2 * p, 1), 4));
      const __m256i hi = _mm256_or_si256(bits8(q4, 4, 0x0F), _mm256_slli_epi16(bits8(qh, 2 * p + 1, 1), 4));
      sumi = _mm256_add_epi32(sumi, dot_scaled(lo, a[b].qs + 64 * p, _mm256_set1_epi16(sm[2 * p])));
      sumi = _mm256_add_epi32(sumi, dot_scaled(hi, a[b].qs + 64 * p + 32, _mm256_set1_epi16(sm[2 * p + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(_mm256_sub_ps(acc, accm));
}

float vec_dot_q2_K(int64_t n, const void* w_row, const void* xq) {
  const block_q2_K* w = static_cast<const block_q2_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = h2f(w[b].d) * a[b].d, dmin = h2f(w[b].dmin) * a[b].d;
    const __m128i sc8 = load128(w[b].scales);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0F)));
    accm = fold_mins(accm, dmin, a[b].bsums, mins);
    __m256i sumi = _mm256_setzero_si256();
    for (int u = 0; u < 8; ++u) {
      const __m256i codes = bits8(load256(w[b].qs + 32 * (u / 4)), 2 * (u % 4), 3);
      const __m256i s = scale_pair(w[b].scales[2 * u] & 0xF, w[b].scales[2 * u + 1] & 0xF);
      sumi = _mm256_add_epi32(sumi, dot_scaled(codes, a[b].qs + 32 * u, s));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(_mm256_sub_ps(acc, accm));
}

// Q3_K: the codes q + 4 (0..7) through maddubs, then 4 * sum_i sc_i * bsums_i taken off.
float vec_dot_q3_K(int64_t n, const void* w_row, const void* xq) {
  const block_q3_K* w = static_cast<const block_q3_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    alignas(16) int8_t sc[16];
    unpack_k3_scales(w[b].scales, sc);
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(sc));
    const __m256i corr = _mm256_madd_epi16(load256(a[b].bsums), sc16);
    const __m256i hm = load256(w[b].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int u = 0; u < 8; ++u) {
      const __m256i lo = bits8(load256(w[b].qs + 32 * (u / 4)), 2 * (u % 4), 3);
      const __m256i codes = _mm256_or_si256(lo, _mm256_slli_epi16(bits8(hm, u, 1), 2));
      sumi = _mm256_add_epi32(sumi, dot_scaled(codes, a[b].qs + 32 * u, scale_pair(sc[2 * u], sc[2 * u + 1])));
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 2));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * a[b].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

float vec_dot_iq4_xs(int64_t n, const void* w_row, const void* xq) {
  const block_iq4_xs* w = static_cast<const block_iq4_xs*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int8_t ls[8];
    unpack_iq4xs_scales(w[b], ls);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i p = dot_s8s8(iq4_levels32(w[b].qs + 16 * j), load256(a[b].qs + 32 * j));
      sumi = _mm256_add_epi32(sumi, _mm256_mullo_epi32(p, _mm256_set1_epi32(ls[j])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * a[b].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// IQ4_NL over drivers::block_dot (as Q4_0 in avx2.cpp): signed levels by the sign trick.
struct Int8IQ4_NL {
  using W = block_iq4_nl;
  using A = block_q8_0;
  using V = __m256;
  static constexpr int kAccs = 2;
  static constexpr bool kMin = false;
  static PLLM_AI V zero() { return _mm256_setzero_ps(); }
  static PLLM_AI V add(V x, V y) { return _mm256_add_ps(x, y); }
  static PLLM_AI float hsum(V v) { return avx2::hsum(v); }
  static PLLM_AI V fold(V acc, const W& w, const A& a) {
    const __m256i p = dot_s8s8(iq4_levels32(w.qs), load256(a.qs));
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f(w.d) * h2f(a.d)), _mm256_cvtepi32_ps(p), acc);
  }
};

}  // namespace

void fill_lowbit_avx2(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  drivers::set_exact<F32x8, DecQ2_K>(at(TensorType::Q2_K));
  drivers::set_exact<F32x8, DecQ3_K>(at(TensorType::Q3_K));
  drivers::set_exact<F32x8, DecQ5_K>(at(TensorType::Q5_K));
  drivers::set_exact<F32x8, DecIQ4_NL>(at(TensorType::IQ4_NL));
  drivers::set_exact<F32x8, DecIQ4_XS>(at(TensorType::IQ4_XS));
  at(TensorType::Q2_K).vec_dot = vec_dot_q2_K;
  at(TensorType::Q3_K).vec_dot = vec_dot_q3_K;
  at(TensorType::Q5_K).vec_dot = vec_dot_q5_K;
  at(TensorType::IQ4_NL).vec_dot = drivers::block_dot<Int8IQ4_NL>;
  at(TensorType::IQ4_XS).vec_dot = vec_dot_iq4_xs;
}

}  // namespace pllm::kern
