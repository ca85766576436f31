// SwiGLU, GeGLU and the delta rule (KernelTable::swiglu_f32, geglu_f32, delta_rule_step) with AVX2 + FMA,
// used by every x86 table. Compiled
// with the avx2.cpp flags; used only after dispatch.cpp has checked the CPU.
//
// silu(g) * u = g * u / (1 + exp(-g)). exp: x = n ln2 + r with n = round(x / ln2) and
// |r| <= ln2 / 2 (Cody-Waite split of ln2 into a high part exact in f32 and a low
// part), e^r by its degree-6 Taylor polynomial (truncation < 1.2e-7 relative), times 2^n
// built in the exponent bits. x is clamped to [-87.3, 88.7] so 2^n stays a normal f32:
// past that silu is g (for large g) or ~0 (for very negative g) to f32 precision anyway.
// Within ~3 ulp of the scalar twin's std::exp-based result (tests/cpp/test_act.cpp).
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/delta_rule.h"
#include "kernels/internal.h"
#include "kernels/x86/simd_avx2.h"

namespace pllm::kern {

namespace {

inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

// The tail, as the scalar twin (a local copy: see internal.h on shared inline functions).
float swiglu_tail(float g, float u) { return g / (1.0f + __builtin_expf(-g)) * u; }

void swiglu(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv)));
    _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(gv, _mm256_loadu_ps(u + i)), den));
  }
  for (; i < n; ++i) out[i] = swiglu_tail(g[i], u[i]);
}

float geglu_tail(float x, float u) {
  const float y2 = -1.5957691216057308f * (x + 0.044715f * x * x * x);
  return x / (1.0f + __builtin_expf(y2)) * u;
}

void geglu(const float* g, const float* u, float* out, int64_t n) {
  const __m256 c = _mm256_set1_ps(0.044715f), k2 = _mm256_set1_ps(-1.5957691216057308f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 y2 = _mm256_mul_ps(k2, _mm256_fmadd_ps(_mm256_mul_ps(c, x), _mm256_mul_ps(x, x), x));
    const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(y2));
    _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(x, _mm256_loadu_ps(u + i)), den));
  }
  for (; i < n; ++i) out[i] = geglu_tail(g[i], u[i]);
}

}  // namespace

void fill_act_avx2(KernelTable& t) {
  t.swiglu_f32 = swiglu;
  t.geglu_f32 = geglu;
  // The 32 partial sums in 4 ymm, the shared f32 traits (hsum in the driver's order). zmm would
  // not be faster on Zen 4, which splits 512-bit operations in two: the avx512 table uses this.
  t.delta_rule_step = drivers::delta_rule_step<avx2::F32x8>;
}

}  // namespace pllm::kern
