// W4A16 on AVX2 + FMA + F16C: fp16 activations, weights decoded in registers, f32 FMA.
// Compiled with -mavx2 -mfma -mf16c; anonymous namespace only (see avx2.cpp).
//
// The activation row is stored as IEEE halves (f32_to_f16_row, round to nearest even) and
// widened with vcvtph2ps (exact) as it is loaded. Weights are decoded exactly as in the
// exact-mode kernels (avx2.cpp: the floats dequantize_row gives), so a product differs from
// the scalar twin (f16act_scalar.cpp) only by f32 accumulation: each activation row gets A
// independent 8-lane accumulators (A = 4, 2, 1 for NX <= 2, <= 4, <= 8), i.e. <= n/8 lane
// additions + 5 reduction levels, the same bound as vec_dot_f32 (tests/cpp/test_f16act.cpp).
//
// The avx512 table uses these kernels too. A 512-bit variant (two __m512 per block, vcvtph2ps
// zmm) measured slower on Zen 4: one core, Q4_0 576 x 1536, 4 tokens per decoded block
// (vec_dot_f16act_multi): 165 us vs 120 us here (exact mode's 512-bit kernel: 95 us); one token:
// 75 vs 65 us. Widening the activations is the extra cost of this format on x86: one
// vcvtph2ps per FMA, where exact mode loads f32 for free.
#include <immintrin.h>

#include <cstdint>

#include "kernels/internal.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }
PLLM_AI __m256 load8h(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
PLLM_AI __m256i zx8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

PLLM_AI float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], kRound);
}

// Decoders: one 32-element block -> four __m256 holding dequantize_row's floats.
// d * (q - 8) == fma(q, d, -8d) exactly (11-bit d times a 4-bit integer).
struct DecQ4_0 {
  const block_q4_0* w;
  explicit DecQ4_0(const void* row) : w(static_cast<const block_q4_0*>(row)) {}
  PLLM_AI void block(int64_t b, __m256 v[4]) const {
    const float df = h2f(w[b].d);
    const __m256 d = _mm256_set1_ps(df), m8d = _mm256_set1_ps(-8.0f * df);
    const __m256i a = zx8(w[b].qs), c = zx8(w[b].qs + 8), m4 = _mm256_set1_epi32(0x0F);
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(a, m4)), d, m8d);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(c, m4)), d, m8d);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), d, m8d);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c, 4)), d, m8d);
  }
};

// reference d * q + m; d * q is exact, so fma(q, d, m) rounds identically.
struct DecQ4_1 {
  const block_q4_1* w;
  explicit DecQ4_1(const void* row) : w(static_cast<const block_q4_1*>(row)) {}
  PLLM_AI void block(int64_t b, __m256 v[4]) const {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d)), m = _mm256_set1_ps(h2f(w[b].m));
    const __m256i a = zx8(w[b].qs), c = zx8(w[b].qs + 8), m4 = _mm256_set1_epi32(0x0F);
    v[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(a, m4)), d, m);
    v[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(c, m4)), d, m);
    v[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), d, m);
    v[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(c, 4)), d, m);
  }
};

struct DecQ8_0 {
  const block_q8_0* w;
  explicit DecQ8_0(const void* row) : w(static_cast<const block_q8_0*>(row)) {}
  PLLM_AI void block(int64_t b, __m256 v[4]) const {
    const __m256 d = _mm256_set1_ps(h2f(w[b].d));
    for (int k = 0; k < 4; ++k) {
      const __m256i i = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w[b].qs + 8 * k)));
      v[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(i));
    }
  }
};

template <int NX, class D>
void fused(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, float* out, int64_t os) {
  constexpr int A = NX <= 2 ? 4 : NX <= 4 ? 2 : 1;
  const D dec(w_row);
  __m256 acc[NX][A];
  for (int j = 0; j < NX; ++j)
    for (int a = 0; a < A; ++a) acc[j][a] = _mm256_setzero_ps();
  const uint16_t* xp = x;
  for (int64_t b = 0; b < n / 32; ++b, xp += 32) {
    __m256 wv[4];
    dec.block(b, wv);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < NX; ++j) acc[j][k % A] = _mm256_fmadd_ps(wv[k], load8h(xp + j * xs + 8 * k), acc[j][k % A]);
  }
  for (int j = 0; j < NX; ++j) {
    __m256 s = acc[j][0];
    if constexpr (A == 4) s = _mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]), _mm256_add_ps(acc[j][2], acc[j][3]));
    if constexpr (A == 2) s = _mm256_add_ps(acc[j][0], acc[j][1]);
    out[j * os] = hsum(s);
  }
}

template <class D>
float fused_one(int64_t n, const void* w_row, const uint16_t* x) {
  float r;
  fused<1, D>(n, w_row, x, 0, &r, 0);
  return r;
}

template <class D>
void fused_multi(int64_t n, const void* w_row, const uint16_t* x, int64_t xs, int n_x, float* out, int64_t os) {
  for (int j0 = 0; j0 < n_x; j0 += 8) {
    const uint16_t* xr = x + j0 * xs;
    float* o = out + j0 * os;
    switch (n_x - j0 < 8 ? n_x - j0 : 8) {
      case 1: fused<1, D>(n, w_row, xr, xs, o, os); break;
      case 2: fused<2, D>(n, w_row, xr, xs, o, os); break;
      case 3: fused<3, D>(n, w_row, xr, xs, o, os); break;
      case 4: fused<4, D>(n, w_row, xr, xs, o, os); break;
      case 5: fused<5, D>(n, w_row, xr, xs, o, os); break;
      case 6: fused<6, D>(n, w_row, xr, xs, o, os); break;
      case 7: fused<7, D>(n, w_row, xr, xs, o, os); break;
      default: fused<8, D>(n, w_row, xr, xs, o, os); break;
    }
  }
}

template <class D>
void set(KernelTable& t, TensorType type) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  k.vec_dot_f16act = fused_one<D>;
  k.vec_dot_f16act_multi = fused_multi<D>;
}

}  // namespace

void fill_f16act_avx2(KernelTable& t) {
  t.f32_to_f16_row = f32_to_f16_row;
  set<DecQ4_0>(t, TensorType::Q4_0);
  set<DecQ4_1>(t, TensorType::Q4_1);
  set<DecQ8_0>(t, TensorType::Q8_0);
}

}  // namespace pllm::kern
