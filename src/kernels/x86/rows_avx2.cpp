// AVX2 (+FMA, F16C) decode matvec: several weight rows against one activation row
// (TypeKernels::vec_dot_rows / vec_dot_f32_rows) or against 2-8 activation rows of a
// batched decode step (vec_dot_rows_multi) for Q4_0, Q4_1 and Q8_0. Same scheme as
// rows_avx512.cpp (read that first): 4 rows per pass share every activation load and
// per-block activation term, one 8-lane accumulator per (row, activation row), one
// combined horizontal sum per 4 rows; remainders of 1..3 rows run the same code with fewer
// rows.
//
// Integer block sums: maddubs (unsigned x signed bytes -> i16 pairs) then madd with 1
// -> i32; no i16 saturation is possible: Q4 nibbles <= 15 (|pair| <= 2*15*128), and
// Q8_0 goes through |w| x sign(a, w) (|pair| <= 2*128*128 = 32768 only for w = a = -128,
// which quantize_act never produces: |a| <= 127, so |pair| <= 2*128*127 < 32767).
// Exact path: decoded weights bit-identical to dequantize_row, two 8-lane FMA
// accumulators per row.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/drivers/row_groups.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx2.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }
PLLM_AI __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
PLLM_AI __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
// The R rows are R interleaved streams too short for the hardware prefetchers to
// train on; since they are normally contiguous, prefetch the group as one linear stream
// 4 rows ahead (see rows_avx512.cpp).
PLLM_AI void prefetch_lines(const uint8_t* p, int bytes) {
  for (int k = 0; k < bytes; k += 64) _mm_prefetch(reinterpret_cast<const char*>(p + k), _MM_HINT_T0);
}

// 16 packed bytes -> 32 nibbles in element order (low nibbles, then high nibbles).
PLLM_AI __m256i nibbles32(const uint8_t* p) {
  const __m128i t = load128(p);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}
// i16 pairs -> i32 sums.
PLLM_AI __m256i sum_pairs(__m256i p16) { return _mm256_madd_epi16(p16, _mm256_set1_epi16(1)); }

template <int R>
PLLM_AI void store_sums(const __m256* acc, float* out) {
  __m128 t[4];
  for (int r = 0; r < R; ++r) t[r] = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
  if constexpr (R == 4) {
    _mm_storeu_ps(out, _mm_hadd_ps(_mm_hadd_ps(t[0], t[1]), _mm_hadd_ps(t[2], t[3])));
  } else {
    for (int r = 0; r < R; ++r) {
      const __m128 h = _mm_hadd_ps(t[r], t[r]);
      out[r] = _mm_cvtss_f32(_mm_hadd_ps(h, h));
    }
  }
}

// ------------------------------------------------------------ int8 activations
// Per type M: wload unpacks a weight block once for every activation row it meets (Wb);
// aprep gives an activation block's scale (and Q4_1's min term s / 8) as floats; dot folds
// one (weight, activation) block pair into an 8-lane accumulator. Lane k of a pair holds the
// exact integer sum over elements 4k..4k+3 and gets the same roundings in both kernels below,
// so a batched step (Wide) gives bit-for-bit the one-row result (Rows).

// Q4_0: the nibbles minus 8 as signed bytes q; sum q a = sum |q| sign(a, q).
struct MQ4_0 {
  using W = block_q4_0;
  using A = block_q8_0;
  struct Wb { __m256i qa, qs; __m256 d; };
  static PLLM_AI Wb wload(const W& b) {
    const __m256i q = _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8));
    return {_mm256_sign_epi8(q, q), q, _mm256_set1_ps(h2f(b.d))};
  }
  static PLLM_AI void aprep(const A& a, float& d, float& s8) { d = h2f(a.d), s8 = 0.0f; }
  static PLLM_AI __m256 dot(__m256 acc, const Wb& w, const A& a, const float* ad, const float*) {
    const __m256i p = sum_pairs(_mm256_maddubs_epi16(w.qa, _mm256_sign_epi8(load256(a.qs), w.qs)));
    return _mm256_fmadd_ps(_mm256_mul_ps(w.d, _mm256_broadcast_ss(ad)), _mm256_cvtepi32_ps(p), acc);
  }
};

// Q4_1: sum (d q + m) ad a = d ad sum q a + m s; m s added as m * (s / 8) on 8 lanes.
struct MQ4_1 {
  using W = block_q4_1;
  using A = block_q8_1;
  struct Wb { __m256i q; __m256 d, m; };
  static PLLM_AI Wb wload(const W& b) { return {nibbles32(b.qs), _mm256_set1_ps(h2f(b.d)), _mm256_set1_ps(h2f(b.m))}; }
  static PLLM_AI void aprep(const A& a, float& d, float& s8) { d = a.d, s8 = a.s * 0.125f; }
  static PLLM_AI __m256 dot(__m256 acc, const Wb& w, const A& a, const float* ad, const float* s8) {
    const __m256i p = sum_pairs(_mm256_maddubs_epi16(w.q, load256(a.qs)));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(w.d, _mm256_broadcast_ss(ad)), _mm256_cvtepi32_ps(p), acc);
    return _mm256_fmadd_ps(w.m, _mm256_broadcast_ss(s8), acc);
  }
};

// Q8_0: sum w a = sum |w| sign(a, w).
struct MQ8_0 {
  using W = block_q8_0;
  using A = block_q8_0;
  struct Wb { __m256i qa, qs; __m256 d; };
  static PLLM_AI Wb wload(const W& b) {
    const __m256i q = load256(b.qs);
    return {_mm256_sign_epi8(q, q), q, _mm256_set1_ps(h2f(b.d))};
  }
  static PLLM_AI void aprep(const A& a, float& d, float& s8) { d = h2f(a.d), s8 = 0.0f; }
  static PLLM_AI __m256 dot(__m256 acc, const Wb& w, const A& a, const float* ad, const float*) {
    const __m256i p = sum_pairs(_mm256_maddubs_epi16(w.qa, _mm256_sign_epi8(load256(a.qs), w.qs)));
    return _mm256_fmadd_ps(_mm256_mul_ps(w.d, _mm256_broadcast_ss(ad)), _mm256_cvtepi32_ps(p), acc);
  }
};

// One activation row, R <= 4 weight rows (ws bytes apart) sharing each activation block.
template <class M>
struct Rows {
  template <int R>
  struct K {
    static void run(int64_t nb, const uint8_t* w, size_t ws, const typename M::A* a, float* out) {
      constexpr int kBB = sizeof(typename M::W);
      __m256 acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
      const uint8_t* pf = w + 4 * ws;
      for (int64_t b = 0; b < nb; ++b, pf += R * kBB) {
        prefetch_lines(pf, R * kBB);
        float ad, s8;
        M::aprep(a[b], ad, s8);
        for (int r = 0; r < R; ++r)
          acc[r] = M::dot(acc[r], M::wload(reinterpret_cast<const typename M::W*>(w + r * ws)[b]), a[b], &ad, &s8);
      }
      store_sums<R>(acc, out);
    }
  };
};

// A batched decode step: n_rows weight rows (ws bytes apart) against T <= 8 activation rows
// (as bytes apart), out[t * os + r]. The activations' scales are converted once per call
// (per 256-block slice of a longer row), then each weight block is unpacked once for all T
// rows, one accumulator per activation row (T + the unpacked block + temporaries fit the 16
// ymm registers). Rows wider than one slice add the slices' sums in order.
template <class M>
struct Wide {
  template <int T>
  struct K {
    static void run(int64_t nb, const uint8_t* w, size_t ws, int n_rows, const uint8_t* a, size_t as, float* out,
                    int64_t os) {
      constexpr int kSlice = 256;
      const typename M::A* at[T];
      for (int t = 0; t < T; ++t) at[t] = reinterpret_cast<const typename M::A*>(a + t * as);
      alignas(32) float ad[T][kSlice], s8[T][kSlice];
      for (int64_t b0 = 0; b0 < nb; b0 += kSlice) {
        const int bn = nb - b0 < kSlice ? int(nb - b0) : kSlice;
        for (int t = 0; t < T; ++t)
          for (int i = 0; i < bn; ++i) M::aprep(at[t][b0 + i], ad[t][i], s8[t][i]);
        for (int r = 0; r < n_rows; ++r) {
          const typename M::W* wr = reinterpret_cast<const typename M::W*>(w + r * ws) + b0;
          __m256 acc[T];
          for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
          for (int i = 0; i < bn; ++i) {
            const typename M::Wb wb = M::wload(wr[i]);
            for (int t = 0; t < T; ++t) acc[t] = M::dot(acc[t], wb, at[t][b0 + i], &ad[t][i], &s8[t][i]);
          }
          for (int t = 0; t < T; ++t) {
            float sum;
            store_sums<1>(&acc[t], &sum);
            out[t * os + r] = b0 == 0 ? sum : out[t * os + r] + sum;
          }
        }
      }
    }
  };
};

// ------------------------------------------------------------ f32 activations (exact)
// Block -> 32 floats in four __m256 (element order), bit-identical to dequantize_row.
struct DecQ4_0 {
  using Block = block_q4_0;
  static PLLM_AI void unit(const Block& blk, __m256 v[4]) {
    const __m256 d = _mm256_set1_ps(h2f(blk.d));
    const __m128i t = load128(blk.qs);
    const __m256i u0 = _mm256_cvtepu8_epi32(t), u1 = _mm256_cvtepu8_epi32(_mm_srli_si128(t, 8));
    const __m256i m = _mm256_set1_epi32(0x0F), e8 = _mm256_set1_epi32(8);
    v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(u0, m), e8)), d);
    v[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(u1, m), e8)), d);
    v[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(u0, 4), e8)), d);
    v[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(u1, 4), e8)), d);
  }
};

struct DecQ4_1 {
  using Block = block_q4_1;
  static PLLM_AI void unit(const Block& blk, __m256 v[4]) {
    const __m256 d = _mm256_set1_ps(h2f(blk.d)), mm = _mm256_set1_ps(h2f(blk.m));
    const __m128i t = load128(blk.qs);
    const __m256i u0 = _mm256_cvtepu8_epi32(t), u1 = _mm256_cvtepu8_epi32(_mm_srli_si128(t, 8));
    const __m256i m = _mm256_set1_epi32(0x0F);
    // d * q is exact (4-bit q, fp16 d): the FMA rounds like dequantize_row's d*q + m.
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(u0, m)), d, mm);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(u1, m)), d, mm);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(u0, 4)), d, mm);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(u1, 4)), d, mm);
  }
};

struct DecQ8_0 {
  using Block = block_q8_0;
  static PLLM_AI void unit(const Block& blk, __m256 v[4]) {
    const __m256 d = _mm256_set1_ps(h2f(blk.d));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + 8 * k));
      v[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
    }
  }
};

// ------------------------------------------------------------ row groups (drivers/row_groups.h)
// Exact mode: the driver's row kernel over this file's decoders.
struct RowsSimd : avx2::F32x8 {
  static PLLM_AI void prefetch(const uint8_t* p, int bytes) { prefetch_lines(p, bytes); }
  template <int R>
  static PLLM_AI void store_sums(const V* acc, float* out) { pllm::kern::store_sums<R>(acc, out); }
};

}  // namespace

void fill_rows_avx2(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  auto int8 = [&]<class M>(TensorType type) {
    at(type).vec_dot_rows = drivers::rows_by_4<Rows<M>::template K, typename M::A>;
    at(type).vec_dot_rows_multi = drivers::acts_in_groups_of_8<Wide<M>::template K>;
  };
  int8.operator()<MQ4_0>(TensorType::Q4_0);
  int8.operator()<MQ4_1>(TensorType::Q4_1);
  int8.operator()<MQ8_0>(TensorType::Q8_0);
  at(TensorType::Q4_0).vec_dot_f32_rows = drivers::exact_rows<RowsSimd, DecQ4_0>;
  at(TensorType::Q4_1).vec_dot_f32_rows = drivers::exact_rows<RowsSimd, DecQ4_1>;
  at(TensorType::Q8_0).vec_dot_f32_rows = drivers::exact_rows<RowsSimd, DecQ8_0>;
}

}  // namespace pllm::kern
