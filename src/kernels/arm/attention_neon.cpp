// NEON (AArch64 Advanced SIMD, baseline ARMv8.0) attention kernels; same algorithm
// as x86/attention_avx2.cpp with 4-lane registers: scores four positions at a time
// with four accumulators each (16 partial sums per dot), exp via a 4-lane Cephes
// polynomial, and acc += p_t v_t in blocks of 32 output dims x two positions (16
// FMA chains; AArch64 has 32 vector registers). fp16 caches are widened with
// vcvt_f32_f16 (FCVTL, baseline ARMv8).
#include <arm_neon.h>

#include <cmath>
#include <cstdint>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = 64;  // positions per online-softmax step (multiple of 4)

PLLM_AI float32x4_t ld4(const float* p) { return vld1q_f32(p); }
PLLM_AI float32x4_t ld4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

// exp(x) for x <= 0; see x86/attention_avx2.cpp. x < -87 (incl. -inf) gives 0.
PLLM_AI float32x4_t exp_neg(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.0f);
  const uint32x4_t keep = vcgeq_f32(x, lo);
  x = vmaxq_f32(x, lo);
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t y = vdupq_n_f32(1.9875691500e-4f);
  y = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), y, r);
  y = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), y, r);
  y = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), y, r);
  y = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), y, r);
  y = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), y, r);
  y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), y, vmulq_f32(r, r));
  const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  y = vmulq_f32(y, vreinterpretq_f32_s32(e));
  return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(y), keep));
}

template <class T>
PLLM_AI float32x4_t dot4(const float* q, const T* k0, int64_t stride, int hd) {
  const T* kp[4] = {k0, k0 + stride, k0 + 2 * stride, k0 + 3 * stride};
  float32x4_t a[4][4];
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 4; ++c) a[i][c] = vdupq_n_f32(0.0f);
  for (int d = 0; d < hd; d += 16) {
    const float32x4_t q0 = vld1q_f32(q + d), q1 = vld1q_f32(q + d + 4);
    const float32x4_t q2 = vld1q_f32(q + d + 8), q3 = vld1q_f32(q + d + 12);
    for (int i = 0; i < 4; ++i) {
      a[i][0] = vfmaq_f32(a[i][0], q0, ld4(kp[i] + d));
      a[i][1] = vfmaq_f32(a[i][1], q1, ld4(kp[i] + d + 4));
      a[i][2] = vfmaq_f32(a[i][2], q2, ld4(kp[i] + d + 8));
      a[i][3] = vfmaq_f32(a[i][3], q3, ld4(kp[i] + d + 12));
    }
  }
  float32x4_t s[4];
  for (int i = 0; i < 4; ++i) s[i] = vaddq_f32(vaddq_f32(a[i][0], a[i][1]), vaddq_f32(a[i][2], a[i][3]));
  return vpaddq_f32(vpaddq_f32(s[0], s[1]), vpaddq_f32(s[2], s[3]));
}

template <class T>
PLLM_AI float dot1(const float* q, const T* k, int hd) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  for (int d = 0; d < hd; d += 16) {
    a0 = vfmaq_f32(a0, vld1q_f32(q + d), ld4(k + d));
    a1 = vfmaq_f32(a1, vld1q_f32(q + d + 4), ld4(k + d + 4));
    a2 = vfmaq_f32(a2, vld1q_f32(q + d + 8), ld4(k + d + 8));
    a3 = vfmaq_f32(a3, vld1q_f32(q + d + 12), ld4(k + d + 12));
  }
  return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
}

// acc[d0 .. d0 + 4*NV) += sum_{j < cn} p[j] * v[j * stride + .]
template <int NV, class T>
PLLM_AI void accumulate_block(const float* p, const T* v, int64_t stride, int cn, float* acc) {
  float32x4_t x[NV], y[NV];
  for (int c = 0; c < NV; ++c) {
    x[c] = vld1q_f32(acc + 4 * c);
    y[c] = vdupq_n_f32(0.0f);
  }
  int j = 0;
  for (; j + 2 <= cn; j += 2, v += 2 * stride) {
    const float p0 = p[j], p1 = p[j + 1];
    for (int c = 0; c < NV; ++c) {
      x[c] = vfmaq_n_f32(x[c], ld4(v + 4 * c), p0);
      y[c] = vfmaq_n_f32(y[c], ld4(v + stride + 4 * c), p1);
    }
  }
  if (j < cn) {
    for (int c = 0; c < NV; ++c) x[c] = vfmaq_n_f32(x[c], ld4(v + 4 * c), p[j]);
  }
  for (int c = 0; c < NV; ++c) vst1q_f32(acc + 4 * c, vaddq_f32(x[c], y[c]));
}

template <class T>
PLLM_AI void accumulate(const float* p, const T* v, int64_t stride, int cn, int hd, float* acc) {
  int d = 0;
  for (; d + 32 <= hd; d += 32) accumulate_block<8>(p, v + d, stride, cn, acc + d);
  if (d < hd) accumulate_block<4>(p, v + d, stride, cn, acc + d);  // hd % 32 == 16
}

template <class T>
void attn_head(const float* q, const T* k, const T* v, int64_t stride, int n_pos, int hd, float scale, float* out) {
  if (n_pos <= 0) {
    for (int d = 0; d < hd; ++d) out[d] = 0.0f;
    return;
  }
  alignas(16) float acc[256];
  alignas(16) float s[kChunk];
  for (int d = 0; d < hd; d += 4) vst1q_f32(acc + d, vdupq_n_f32(0.0f));
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < n_pos; t0 += kChunk) {
    const int cn = n_pos - t0 < kChunk ? n_pos - t0 : kChunk;
    const int cn4 = (cn + 3) & ~3;
    const T* kc = k + t0 * stride;
    int j = 0;
    for (; j + 4 <= cn; j += 4) vst1q_f32(s + j, vmulq_n_f32(dot4(q, kc + j * stride, stride, hd), scale));
    for (; j < cn; ++j) s[j] = dot1(q, kc + j * stride, hd) * scale;
    for (; j < cn4; ++j) s[j] = -INFINITY;  // padding: exp_neg gives 0

    float32x4_t vm = vld1q_f32(s);
    for (j = 4; j < cn4; j += 4) vm = vmaxq_f32(vm, vld1q_f32(s + j));
    const float cm = vmaxvq_f32(vm);
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const float r = std::exp(m - cm);
      for (int d = 0; d < hd; d += 4) vst1q_f32(acc + d, vmulq_n_f32(vld1q_f32(acc + d), r));
      l *= r;
      m = cm;
    }
    const float32x4_t vmax = vdupq_n_f32(m);
    float32x4_t vl = vdupq_n_f32(0.0f);
    for (j = 0; j < cn4; j += 4) {
      const float32x4_t p = exp_neg(vsubq_f32(vld1q_f32(s + j), vmax));
      vst1q_f32(s + j, p);
      vl = vaddq_f32(vl, p);
    }
    l += vaddvq_f32(vl);
    accumulate(s, v + t0 * stride, stride, cn, hd, acc);
  }
  const float inv = 1.0f / l;
  for (int d = 0; d < hd; d += 4) vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(acc + d), inv));
}

void attn_head_f32(const float* q, const float* k, const float* v, int64_t kv_stride, int n_pos, int head_dim,
                   float scale, float* out) {
  attn_head(q, k, v, kv_stride, n_pos, head_dim, scale, out);
}

void attn_head_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride, int n_pos, int head_dim,
                   float scale, float* out) {
  attn_head(q, k, v, kv_stride, n_pos, head_dim, scale, out);
}

#undef PLLM_AI

}  // namespace

void fill_attention_neon(KernelTable& t) {
  t.attn_head_f32 = attn_head_f32;
  t.attn_head_f16 = attn_head_f16;
}

}  // namespace pllm::kern
