// SwiGLU, GeGLU and the delta rule (KernelTable::swiglu_f32, geglu_f32, delta_rule_step) with baseline
// NEON, used by every ARM table. Same method and constants as x86/act_avx2.cpp (see there): clamp,
// Cody-Waite reduction, degree-6 polynomial, 2^n in the exponent bits.
#include <arm_neon.h>

#include <cstdint>

#include "kernels/arm/simd_neon.h"
#include "kernels/drivers/delta_rule.h"
#include "kernels/internal.h"

namespace pllm::kern {

namespace {

inline float32x4_t exp4(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.7f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t e = vshlq_n_s32(vcvtq_s32_f32(n), 23);
  return vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(p), e));
}

// The tail, as the scalar twin (a local copy: see internal.h on shared inline functions).
float swiglu_tail(float g, float u) { return g / (1.0f + __builtin_expf(-g)) * u; }

void swiglu(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t gv = vld1q_f32(g + i);
    const float32x4_t den = vaddq_f32(vdupq_n_f32(1.0f), exp4(vnegq_f32(gv)));
    vst1q_f32(out + i, vdivq_f32(vmulq_f32(gv, vld1q_f32(u + i)), den));
  }
  for (; i < n; ++i) out[i] = swiglu_tail(g[i], u[i]);
}

float geglu_tail(float x, float u) {
  const float y2 = -1.5957691216057308f * (x + 0.044715f * x * x * x);
  return x / (1.0f + __builtin_expf(y2)) * u;
}

void geglu(const float* g, const float* u, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t x = vld1q_f32(g + i);
    const float32x4_t y2 =
        vmulq_f32(vdupq_n_f32(-1.5957691216057308f), vfmaq_f32(x, vmulq_n_f32(x, 0.044715f), vmulq_f32(x, x)));
    const float32x4_t den = vaddq_f32(vdupq_n_f32(1.0f), exp4(y2));
    vst1q_f32(out + i, vdivq_f32(vmulq_f32(x, vld1q_f32(u + i)), den));
  }
  for (; i < n; ++i) out[i] = geglu_tail(g[i], u[i]);
}

// drivers/delta_rule.h on q registers (the 32 partial sums in 8): the shared f32 traits, with the
// lanes added in the driver's order (vaddvq_f32 adds neighbours first).
struct DeltaRuleNeon : neon::F32x4 {
  static float hsum(V v) {
    const float32x2_t h = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);
  }
};

}  // namespace

void fill_act_neon(KernelTable& t) {
  t.swiglu_f32 = swiglu;
  t.geglu_f32 = geglu;
  t.delta_rule_step = drivers::delta_rule_step<DeltaRuleNeon>;
}

}  // namespace pllm::kern
