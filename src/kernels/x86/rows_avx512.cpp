// AVX-512 (F/BW/VL) + VNNI decode matvec: several weight rows against one activation row
// (TypeKernels::vec_dot_rows / vec_dot_f32_rows) for Q4_0, Q4_1 and Q8_0. Compiled with
// the avx512.cpp flags; used only after dispatch.cpp has checked the CPU.
//
// Decode rows are short (576 or 1536 elements = 18 or 48 blocks), so the one-row kernels
// spend a large share on per-row work: the call, accumulator setup, the horizontal sum,
// reloading the activation blocks and their per-block constants. Here 4 rows are
// streamed together: each activation block pair (its int8 quants, its scale, and for
// Q4_0/Q8_0 the offset correction dpbusd(8 or 128, a)) is loaded/computed once and used
// by 4 rows; each row keeps one 16-lane accumulator; the four row sums come out of one
// combined horizontal reduction (one 128-bit store). Remainders of 1..3 rows use the
// same code with fewer rows.
//
// Arithmetic is the one of avx512.cpp's vec_dot (integer block sums exact, one f32 FMA
// per block pair per row), so the vec_dot error bound holds unchanged. The exact path
// decodes to exactly dequantize_row's floats (all products are exact: a <= 8-bit integer
// times an fp16 scale) and gives each row two 16-lane FMA accumulators.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/drivers/row_groups.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx512.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }
PLLM_AI __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
PLLM_AI __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
PLLM_AI __m512i combine(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Two blocks' 16 packed bytes -> 64 nibbles: [lo(p0), hi(p0), lo(p1), hi(p1)] (element order).
PLLM_AI __m512i nibbles64(const uint8_t* p0, const uint8_t* p1) {
  const __m512i t = _mm512_inserti32x4(_mm512_castsi128_si512(load128(p0)), load128(p1), 2);
  const __m512i u = _mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(2, 2, 0, 0));
  const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi64(u, sh), _mm512_set1_epi8(0x0F));
}
// One block: lanes 0..31 as above, 32..63 zero.
PLLM_AI __m512i nibbles32z(const uint8_t* p) {
  const __m128i t = load128(p);
  const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
  return _mm512_zextsi256_si512(u);
}
// fp16 scales h0 (lanes 0..7) and h1 (lanes 8..15) as f32.
PLLM_AI __m512 scales2h(uint16_t h0, uint16_t h1) {
  const __m256i v = _mm256_mask_set1_epi16(_mm256_set1_epi16(static_cast<short>(h0)), 0xFF00, static_cast<short>(h1));
  return _mm512_cvtph_ps(v);
}
PLLM_AI __m512 scales2f(float lo, float hi) {
  return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(lo), _mm512_set1_ps(hi));
}

// out[r] = horizontal sum of acc[r], r < R.
template <int R>
PLLM_AI void store_sums(const __m512* acc, float* out) {
  if constexpr (R == 4) {
    __m128 t[4];
    for (int r = 0; r < 4; ++r) {
      const __m256 s = _mm256_add_ps(_mm512_castps512_ps256(acc[r]),
                                     _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1)));
      t[r] = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    }
    _mm_storeu_ps(out, _mm_hadd_ps(_mm_hadd_ps(t[0], t[1]), _mm_hadd_ps(t[2], t[3])));
  } else {
    for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
  }
}

// The R rows are read as R interleaved streams, each only 9-27 cache lines long: too
// short for the hardware stream prefetchers to train on (measured: slower than the
// one-row loop when the weights come from DRAM). The rows are normally contiguous, so
// the group is prefetched as ONE linear stream instead: iteration i of a group of R
// rows touches about R * Step bytes, and prefetches that many bytes at
// w + kPrefetchAhead + i * R * Step (kPrefetchAhead = 4 rows ahead).
PLLM_AI void prefetch_lines(const uint8_t* p, int bytes) {
  for (int k = 0; k < bytes; k += 64) _mm_prefetch(reinterpret_cast<const char*>(p + k), _MM_HINT_T0);
}

// ------------------------------------------------------------ int8 activations
// Q4_0: sum (q - 8) a = dpbusd(q, a) - dpbusd(8, a); the second term is per activation
// block and shared by the R rows.
template <int R>
PLLM_AI void q4_0_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_0* a, float* out) {
  constexpr int kBB = sizeof(block_q4_0);
  const __m512i eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  const uint8_t* pf = w + 4 * ws;
  for (; b + 1 < nb; b += 2, pf += R * 2 * kBB) {
    prefetch_lines(pf, R * 2 * kBB);
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512i y8 = _mm512_dpbusd_epi32(zero, eight, y);
    const __m512 ad = scales2h(a[b].d, a[b + 1].d);
    for (int r = 0; r < R; ++r) {
      const block_q4_0* wr = reinterpret_cast<const block_q4_0*>(w + r * ws);
      const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, nibbles64(wr[b].qs, wr[b + 1].qs), y), y8);
      const __m512 d = _mm512_mul_ps(scales2h(wr[b].d, wr[b + 1].d), ad);
      acc[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[r]);
    }
  }
  if (b < nb) {  // odd block out: upper lanes zero (quants and scale)
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));
    const __m512i y8 = _mm512_dpbusd_epi32(zero, eight, y);
    const float ad = h2f(a[b].d);
    for (int r = 0; r < R; ++r) {
      const block_q4_0* wr = reinterpret_cast<const block_q4_0*>(w + r * ws);
      const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, nibbles32z(wr[b].qs), y), y8);
      acc[r] = _mm512_fmadd_ps(scales2f(h2f(wr[b].d) * ad, 0.0f), _mm512_cvtepi32_ps(p), acc[r]);
    }
  }
  store_sums<R>(acc, out);
}

// Q4_1: sum (d q + m) ad a = d ad dpbusd(q, a) + m s; the m s terms go into the same
// accumulator as m * (s / 8) in the 8 lanes of their block (s / 8 is exact).
template <int R>
PLLM_AI void q4_1_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_1* a, float* out) {
  constexpr int kBB = sizeof(block_q4_1);
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  const uint8_t* pf = w + 4 * ws;
  for (; b + 1 < nb; b += 2, pf += R * 2 * kBB) {
    prefetch_lines(pf, R * 2 * kBB);
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512 ad = scales2f(a[b].d, a[b + 1].d);
    const __m512 as = scales2f(a[b].s * 0.125f, a[b + 1].s * 0.125f);
    for (int r = 0; r < R; ++r) {
      const block_q4_1* wr = reinterpret_cast<const block_q4_1*>(w + r * ws);
      const __m512i p = _mm512_dpbusd_epi32(zero, nibbles64(wr[b].qs, wr[b + 1].qs), y);
      const __m512 d = _mm512_mul_ps(scales2h(wr[b].d, wr[b + 1].d), ad);
      acc[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[r]);
      acc[r] = _mm512_fmadd_ps(scales2h(wr[b].m, wr[b + 1].m), as, acc[r]);
    }
  }
  if (b < nb) {
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));
    const float ad = a[b].d, as = a[b].s * 0.125f;
    for (int r = 0; r < R; ++r) {
      const block_q4_1* wr = reinterpret_cast<const block_q4_1*>(w + r * ws);
      const __m512i p = _mm512_dpbusd_epi32(zero, nibbles32z(wr[b].qs), y);
      acc[r] = _mm512_fmadd_ps(scales2f(h2f(wr[b].d) * ad, 0.0f), _mm512_cvtepi32_ps(p), acc[r]);
      acc[r] = _mm512_fmadd_ps(scales2f(h2f(wr[b].m), 0.0f), _mm512_set1_ps(as), acc[r]);
    }
  }
  store_sums<R>(acc, out);
}

// Q8_0: sum w a = dpbusd(w + 128, a) - dpbusd(128, a); the second term is shared.
template <int R>
PLLM_AI void q8_0_rows(int64_t nb, const uint8_t* w, size_t ws, const block_q8_0* a, float* out) {
  constexpr int kBB = sizeof(block_q8_0);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  const uint8_t* pf = w + 4 * ws;
  for (; b + 1 < nb; b += 2, pf += R * 2 * kBB) {
    prefetch_lines(pf, R * 2 * kBB);
    const __m512i y = combine(load256(a[b].qs), load256(a[b + 1].qs));
    const __m512i yb = _mm512_dpbusd_epi32(zero, bias, y);
    const __m512 ad = scales2h(a[b].d, a[b + 1].d);
    for (int r = 0; r < R; ++r) {
      const block_q8_0* wr = reinterpret_cast<const block_q8_0*>(w + r * ws);
      const __m512i q = _mm512_xor_si512(combine(load256(wr[b].qs), load256(wr[b + 1].qs)), bias);
      const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), yb);
      const __m512 d = _mm512_mul_ps(scales2h(wr[b].d, wr[b + 1].d), ad);
      acc[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc[r]);
    }
  }
  if (b < nb) {
    const __m512i y = _mm512_zextsi256_si512(load256(a[b].qs));
    const __m512i yb = _mm512_dpbusd_epi32(zero, bias, y);
    const float ad = h2f(a[b].d);
    for (int r = 0; r < R; ++r) {
      const block_q8_0* wr = reinterpret_cast<const block_q8_0*>(w + r * ws);
      const __m512i q = _mm512_xor_si512(_mm512_zextsi256_si512(load256(wr[b].qs)), bias);
      // upper 256 bits: (0 ^ 0x80) * 0 - 0x80 * 0 = 0
      const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, q, y), yb);
      acc[r] = _mm512_fmadd_ps(scales2f(h2f(wr[b].d) * ad, 0.0f), _mm512_cvtepi32_ps(p), acc[r]);
    }
  }
  store_sums<R>(acc, out);
}

// ------------------------------------------------------------ f32 activations (exact)
// Decoders: block b of a row -> 32 floats in two __m512, bit-identical to dequantize_row.
PLLM_AI __m512i zx16(const uint8_t* p) { return _mm512_cvtepu8_epi32(load128(p)); }

struct DecQ4_0 {
  using Block = block_q4_0;
  static PLLM_AI void unit(const Block& blk, __m512 v[2]) {
    const __m512 d = _mm512_set1_ps(h2f(blk.d));
    const __m512i q = zx16(blk.qs), e8 = _mm512_set1_epi32(8);
    v[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0x0F)), e8)), d);
    v[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(q, 4), e8)), d);
  }
};

struct DecQ4_1 {
  using Block = block_q4_1;
  static PLLM_AI void unit(const Block& blk, __m512 v[2]) {
    const __m512 d = _mm512_set1_ps(h2f(blk.d)), m = _mm512_set1_ps(h2f(blk.m));
    const __m512i q = zx16(blk.qs);
    // d * q is exact (4-bit q, fp16 d), so the FMA rounds like dequantize_row's d*q + m.
    v[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(q, _mm512_set1_epi32(0x0F))), d, m);
    v[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(q, 4)), d, m);
  }
};

struct DecQ8_0 {
  using Block = block_q8_0;
  static PLLM_AI void unit(const Block& blk, __m512 v[2]) {
    const __m512 d = _mm512_set1_ps(h2f(blk.d));
    v[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk.qs))), d);
    v[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk.qs + 16))), d);
  }
};

// ------------------------------------------------------------ row groups (drivers/row_groups.h)
template <int R> struct KQ4_0 { static void run(int64_t nb, const uint8_t* w, size_t ws, const block_q8_0* a, float* o) { q4_0_rows<R>(nb, w, ws, a, o); } };
template <int R> struct KQ4_1 { static void run(int64_t nb, const uint8_t* w, size_t ws, const block_q8_1* a, float* o) { q4_1_rows<R>(nb, w, ws, a, o); } };
template <int R> struct KQ8_0 { static void run(int64_t nb, const uint8_t* w, size_t ws, const block_q8_0* a, float* o) { q8_0_rows<R>(nb, w, ws, a, o); } };

// Exact mode: the driver's row kernel over this file's decoders.
struct RowsSimd : avx512::F32x16 {
  static PLLM_AI void prefetch(const uint8_t* p, int bytes) { prefetch_lines(p, bytes); }
  template <int R>
  static PLLM_AI void store_sums(const V* acc, float* out) { pllm::kern::store_sums<R>(acc, out); }
};

}  // namespace

void fill_rows_avx512(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  at(TensorType::Q4_0).vec_dot_rows = drivers::rows_by_4<KQ4_0, block_q8_0>;
  at(TensorType::Q4_1).vec_dot_rows = drivers::rows_by_4<KQ4_1, block_q8_1>;
  at(TensorType::Q8_0).vec_dot_rows = drivers::rows_by_4<KQ8_0, block_q8_0>;
  at(TensorType::Q4_0).vec_dot_f32_rows = drivers::exact_rows<RowsSimd, DecQ4_0>;
  at(TensorType::Q4_1).vec_dot_f32_rows = drivers::exact_rows<RowsSimd, DecQ4_1>;
  at(TensorType::Q8_0).vec_dot_f32_rows = drivers::exact_rows<RowsSimd, DecQ8_0>;
}

}  // namespace pllm::kern
