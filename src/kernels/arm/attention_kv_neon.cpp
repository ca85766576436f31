// NEON (AArch64 Advanced SIMD, baseline ARMv8.0) KV-cache segment kernels
// (KernelTable::attn_seg_*): the chunked online softmax of
// generic/attention_kv_scalar.cpp with the cache decoded in registers; same structure as
// x86/attention_kv_avx2.cpp with 4-lane registers:
//   scores 4 tokens at a time, four accumulators per token (16 partial sums) and one
//   pairwise-add reduction for all four (a partial last block re-reads the chunk's last
//   row and masks those lanes to -inf); one rescale per chunk; vectorised exp;
//   acc += p_t v_t in blocks of 32 output dims x two tokens (16 FMA chains).
//   q8: the query quantised once per call like kv_quantize_q8 (FCVTNS rounds to nearest
//       even); q.k with SMULL/SMLAL2 (two products <= 2 * 127 * 127 fit int16) and
//       SADALP into int32: exact. Baseline ARMv8.0 only, so both NEON tables use it.
//   q4: keys as q'.code + bias (q'_c = q_c * k_scale_c, bias = sum q_c * k_min_c, once
//       per call); values as (p_t * scale_tb) * code plus sum_t p_t * min_tb per block.
#include <arm_neon.h>

#include <cmath>
#include <cstdint>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = 64;  // tokens per online-softmax step (multiple of 4)

PLLM_AI float32x4_t ld4(const float* p) { return vld1q_f32(p); }
PLLM_AI float32x4_t ld4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
PLLM_AI float h2f(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

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

// Lane i = sum of the lanes of v[i].
PLLM_AI float32x4_t reduce4(const float32x4_t* v) {
  return vpaddq_f32(vpaddq_f32(v[0], v[1]), vpaddq_f32(v[2], v[3]));
}

// The chunked online softmax over n tokens. Src::scores4(t, row) returns the unscaled
// scores of tokens t + row[i]; Src::accumulate(t, p, cn, acc) adds sum_{j < cn} p[j] v_{t+j}.
template <class Src>
PLLM_AI void fold_segment(const Src& src, int n, int hd, float scale, AttnAccum& a) {
  alignas(16) float s[kChunk];
  float m = a.m, l = a.l;
  const float32x4_t ninf = vdupq_n_f32(-INFINITY);
  const int32x4_t iota = {0, 1, 2, 3};
  for (int t0 = 0; t0 < n; t0 += kChunk) {
    const int cn = n - t0 < kChunk ? n - t0 : kChunk;
    const int cn4 = (cn + 3) & ~3;
    float32x4_t vm = ninf;
    for (int j = 0; j < cn; j += 4) {
      int row[4];
      for (int i = 0; i < 4; ++i) row[i] = j + i < cn ? j + i : cn - 1;  // past the end: repeat the last
      float32x4_t sc = vmulq_n_f32(src.scores4(t0, row), scale);
      sc = vbslq_f32(vcgtq_s32(vdupq_n_s32(cn - j), iota), sc, ninf);
      vst1q_f32(s + j, sc);
      vm = vmaxq_f32(vm, sc);
    }
    const float cm = vmaxvq_f32(vm);
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const float r = std::exp(m - cm);
      for (int d = 0; d < hd; d += 4) vst1q_f32(a.acc + d, vmulq_n_f32(vld1q_f32(a.acc + d), r));
      l *= r;
      m = cm;
    }
    const float32x4_t vmax = vdupq_n_f32(m);
    float32x4_t vl = vdupq_n_f32(0.0f);
    for (int j = 0; j < cn4; j += 4) {
      const float32x4_t p = exp_neg(vsubq_f32(vld1q_f32(s + j), vmax));
      vst1q_f32(s + j, p);
      vl = vaddq_f32(vl, p);
    }
    l += vaddvq_f32(vl);
    src.accumulate(t0, s, cn, a.acc);
  }
  a.m = m;
  a.l = l;
}

// ---- f32 / f16 rows ----
template <class T>
struct PlainSrc {
  const float* q;
  const T* k;
  const T* v;
  int64_t stride;
  int hd;

  PLLM_AI float32x4_t scores4(int t0, const int* row) const {
    const T* kr[4];
    for (int i = 0; i < 4; ++i) kr[i] = k + (t0 + row[i]) * stride;
    float32x4_t a[4][4];
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < 4; ++c) a[i][c] = vdupq_n_f32(0.0f);
    for (int d = 0; d < hd; d += 16) {
      float32x4_t qd[4];
      for (int c = 0; c < 4; ++c) qd[c] = vld1q_f32(q + d + 4 * c);
      for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 4; ++c) a[i][c] = vfmaq_f32(a[i][c], qd[c], ld4(kr[i] + d + 4 * c));
    }
    float32x4_t s[4];
    for (int i = 0; i < 4; ++i) s[i] = vaddq_f32(vaddq_f32(a[i][0], a[i][1]), vaddq_f32(a[i][2], a[i][3]));
    return reduce4(s);
  }

  template <int NV>
  PLLM_AI void accumulate_block(const float* p, const T* vt, int cn, float* acc) const {
    float32x4_t x[NV], y[NV];
    for (int c = 0; c < NV; ++c) x[c] = vld1q_f32(acc + 4 * c), y[c] = vdupq_n_f32(0.0f);
    int j = 0;
    for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
      for (int c = 0; c < NV; ++c) {
        x[c] = vfmaq_n_f32(x[c], ld4(vt + 4 * c), p[j]);
        y[c] = vfmaq_n_f32(y[c], ld4(vt + stride + 4 * c), p[j + 1]);
      }
    }
    if (j < cn)
      for (int c = 0; c < NV; ++c) x[c] = vfmaq_n_f32(x[c], ld4(vt + 4 * c), p[j]);
    for (int c = 0; c < NV; ++c) vst1q_f32(acc + 4 * c, vaddq_f32(x[c], y[c]));
  }

  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    const T* v0 = v + t0 * stride;
    int d = 0;
    for (; d + 32 <= hd; d += 32) accumulate_block<8>(p, v0 + d, cn, acc + d);
    if (d < hd) accumulate_block<4>(p, v0 + d, cn, acc + d);  // hd % 32 == 16
  }
};

// ---- q8 ----
// acc (4 x int32) += pairwise sums of q * k over 16 bytes.
PLLM_AI int32x4_t dot16_i8(int32x4_t acc, int8x16_t q, int8x16_t k) {
  const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(q), vget_low_s8(k)), q, k);
  return vpadalq_s16(acc, p);
}
// 16 int8 -> 4 x f32x4
PLLM_AI void i8x16_to_ps(const int8_t* p, float32x4_t* f) {
  const int8x16_t b = vld1q_s8(p);
  const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
  f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  f[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
  f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  f[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

struct Q8Src {
  const int8_t* qi;  // query codes
  const float* dq;   // query scale per group
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, sstride;
  int hd;

  PLLM_AI float32x4_t scores4(int t0, const int* row) const {
    const int8_t* kr[4];
    const float* sr[4];
    for (int i = 0; i < 4; ++i) {
      kr[i] = k + (t0 + row[i]) * stride;
      sr[i] = ks + (t0 + row[i]) * sstride;
    }
    float32x4_t s = vdupq_n_f32(0.0f);
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const int8_t* qg = qi + g * kKvQ8Group;
      const int8x16_t q0 = vld1q_s8(qg), q1 = vld1q_s8(qg + 16), q2 = vld1q_s8(qg + 32), q3 = vld1q_s8(qg + 48);
      int32x4_t acc[4];
      for (int i = 0; i < 4; ++i) {
        const int8_t* kg = kr[i] + g * kKvQ8Group;
        int32x4_t a0 = dot16_i8(vdupq_n_s32(0), q0, vld1q_s8(kg));
        int32x4_t a1 = dot16_i8(vdupq_n_s32(0), q1, vld1q_s8(kg + 16));
        a0 = dot16_i8(a0, q2, vld1q_s8(kg + 32));
        a1 = dot16_i8(a1, q3, vld1q_s8(kg + 48));
        acc[i] = vaddq_s32(a0, a1);
      }
      const int32x4_t isum = vpaddq_s32(vpaddq_s32(acc[0], acc[1]), vpaddq_s32(acc[2], acc[3]));
      const float32x4_t dk = {sr[0][g], sr[1][g], sr[2][g], sr[3][g]};
      s = vfmaq_f32(s, vcvtq_f32_s32(isum), vmulq_n_f32(dk, dq[g]));
    }
    return s;
  }

  // 32 dims (half a group, eight registers) x two tokens per step.
  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    for (int d = 0; d < hd; d += 32) {
      const int g = d / kKvQ8Group;
      float32x4_t x[8], y[8];
      for (int c = 0; c < 8; ++c) x[c] = vld1q_f32(acc + d + 4 * c), y[c] = vdupq_n_f32(0.0f);
      const int8_t* vt = v + t0 * stride + d;
      const float* st = vs + t0 * sstride + g;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride, st += 2 * sstride) {
        const float w0 = p[j] * st[0], w1 = p[j + 1] * st[sstride];
        float32x4_t f[8];
        i8x16_to_ps(vt, f);
        i8x16_to_ps(vt + 16, f + 4);
        for (int c = 0; c < 8; ++c) x[c] = vfmaq_n_f32(x[c], f[c], w0);
        i8x16_to_ps(vt + stride, f);
        i8x16_to_ps(vt + stride + 16, f + 4);
        for (int c = 0; c < 8; ++c) y[c] = vfmaq_n_f32(y[c], f[c], w1);
      }
      if (j < cn) {
        const float w0 = p[j] * st[0];
        float32x4_t f[8];
        i8x16_to_ps(vt, f);
        i8x16_to_ps(vt + 16, f + 4);
        for (int c = 0; c < 8; ++c) x[c] = vfmaq_n_f32(x[c], f[c], w0);
      }
      for (int c = 0; c < 8; ++c) vst1q_f32(acc + d + 4 * c, vaddq_f32(x[c], y[c]));
    }
  }
};

// ---- q4 ----
// Codes of 32 channels (16 bytes, ggml nibble order) -> 8 x f32x4 in channel order.
PLLM_AI void q4_decode32(const uint8_t* p, float32x4_t* f) {
  const uint8x16_t b = vld1q_u8(p);
  const uint8x16_t lo = vandq_u8(b, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(b, 4);
  const uint16x8_t w[4] = {vmovl_u8(vget_low_u8(lo)), vmovl_high_u8(lo), vmovl_u8(vget_low_u8(hi)),
                           vmovl_high_u8(hi)};
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(w[i])));
    f[2 * i + 1] = vcvtq_f32_u32(vmovl_high_u16(w[i]));
  }
}

struct Q4Src {
  const float* qp;  // q_c * k_scale_c
  float bias;       // sum_c q_c * k_min_c
  const KvQ4GroupView* g;
  int hd;
  int base;  // group token of the segment's first token

  PLLM_AI float32x4_t scores4(int t0, const int* row) const {
    t0 += base;
    const uint8_t* kr[4];
    for (int i = 0; i < 4; ++i) kr[i] = g->k_codes + (t0 + row[i]) * g->code_stride;
    float32x4_t a[4][2];
    for (int i = 0; i < 4; ++i) a[i][0] = a[i][1] = vdupq_n_f32(0.0f);
    for (int b = 0; b < hd / 32; ++b) {
      const float* qb = qp + 32 * b;
      for (int i = 0; i < 4; ++i) {
        float32x4_t f[8];
        q4_decode32(kr[i] + 16 * b, f);
        for (int c = 0; c < 8; ++c) a[i][c & 1] = vfmaq_f32(a[i][c & 1], vld1q_f32(qb + 4 * c), f[c]);
      }
    }
    float32x4_t s[4];
    for (int i = 0; i < 4; ++i) s[i] = vaddq_f32(a[i][0], a[i][1]);
    return vaddq_f32(reduce4(s), vdupq_n_f32(bias));
  }

  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    t0 += base;
    for (int b = 0; b < hd / 32; ++b) {
      float32x4_t x[8], y[8];
      for (int c = 0; c < 8; ++c) x[c] = vld1q_f32(acc + 32 * b + 4 * c), y[c] = vdupq_n_f32(0.0f);
      float bias = 0.0f;  // sum_t p_t * min_tb, added once for the block
      int j = 0;
      for (; j + 2 <= cn; j += 2) {
        const int64_t t = t0 + j;
        const uint16_t* sc = g->v_scale + t * g->vs_stride + b;
        const uint16_t* mn = g->v_min + t * g->vs_stride + b;
        const float w0 = p[j] * h2f(sc[0]), w1 = p[j + 1] * h2f(sc[g->vs_stride]);
        bias += p[j] * h2f(mn[0]) + p[j + 1] * h2f(mn[g->vs_stride]);
        float32x4_t f[8];
        q4_decode32(g->v_codes + t * g->code_stride + 16 * b, f);
        for (int c = 0; c < 8; ++c) x[c] = vfmaq_n_f32(x[c], f[c], w0);
        q4_decode32(g->v_codes + (t + 1) * g->code_stride + 16 * b, f);
        for (int c = 0; c < 8; ++c) y[c] = vfmaq_n_f32(y[c], f[c], w1);
      }
      if (j < cn) {
        const int64_t t = t0 + j;
        const float w0 = p[j] * h2f(g->v_scale[t * g->vs_stride + b]);
        bias += p[j] * h2f(g->v_min[t * g->vs_stride + b]);
        float32x4_t f[8];
        q4_decode32(g->v_codes + t * g->code_stride + 16 * b, f);
        for (int c = 0; c < 8; ++c) x[c] = vfmaq_n_f32(x[c], f[c], w0);
      }
      const float32x4_t vb = vdupq_n_f32(bias);
      for (int c = 0; c < 8; ++c) vst1q_f32(acc + 32 * b + 4 * c, vaddq_f32(vaddq_f32(x[c], y[c]), vb));
    }
  }
};

void attn_seg_f32(const float* q, const float* k, const float* v, int64_t stride, int n, int hd, float scale,
                  AttnAccum& a) {
  if (n <= 0) return;
  fold_segment(PlainSrc<float>{q, k, v, stride, hd}, n, hd, scale, a);
}

void attn_seg_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int n, int hd, float scale,
                  AttnAccum& a) {
  if (n <= 0) return;
  fold_segment(PlainSrc<uint16_t>{q, k, v, stride, hd}, n, hd, scale, a);
}

void attn_seg_q8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v, const float* v_scale,
                 int64_t stride, int64_t scale_stride, int n, int hd, float scale, AttnAccum& a) {
  if (n <= 0) return;
  // The query in the cache's format, as kv_quantize_q8 does it: scale amax / 127 (a true
  // division), codes round-to-nearest-even of q / scale, an all-zero group gets codes 0.
  alignas(16) int8_t qi[256];
  float dq[256 / kKvQ8Group];
  for (int g = 0; g < hd / kKvQ8Group; ++g) {
    float32x4_t x[16], amax = vdupq_n_f32(0.0f);
    for (int c = 0; c < 16; ++c) {
      x[c] = vld1q_f32(q + g * kKvQ8Group + 4 * c);
      amax = vmaxq_f32(amax, vabsq_f32(x[c]));
    }
    const float s = vmaxvq_f32(amax) / 127.0f;
    dq[g] = s;
    for (int c = 0; c < 16; c += 2) {
      int32x4_t c0 = vdupq_n_s32(0), c1 = c0;
      if (s != 0.0f) {
        const float32x4_t vs = vdupq_n_f32(s);
        c0 = vcvtnq_s32_f32(vdivq_f32(x[c], vs));
        c1 = vcvtnq_s32_f32(vdivq_f32(x[c + 1], vs));
      }
      int8x8_t b = vqmovn_s16(vcombine_s16(vqmovn_s32(c0), vqmovn_s32(c1)));
      b = vmax_s8(b, vdup_n_s8(-127));
      vst1_s8(qi + g * kKvQ8Group + 4 * c, b);
    }
  }
  fold_segment(Q8Src{qi, dq, k, k_scale, v, v_scale, stride, scale_stride, hd}, n, hd, scale, a);
}

void attn_seg_q4(const float* q, const KvQ4GroupView& g, int t0, int t1, int hd, float scale, AttnAccum& a) {
  if (t1 <= t0) return;
  alignas(16) float qp[256];
  float32x4_t vb = vdupq_n_f32(0.0f);
  for (int d = 0; d < hd; d += 4) {
    const float32x4_t qd = vld1q_f32(q + d);
    vst1q_f32(qp + d, vmulq_f32(qd, ld4(g.k_scale + d)));
    vb = vfmaq_f32(vb, qd, ld4(g.k_min + d));
  }
  fold_segment(Q4Src{qp, vaddvq_f32(vb), &g, hd, t0}, t1 - t0, hd, scale, a);
}

#undef PLLM_AI

}  // namespace

void fill_attention_kv_neon(KernelTable& t) {
  t.attn_seg_f32 = attn_seg_f32;
  t.attn_seg_f16 = attn_seg_f16;
  t.attn_seg_q8 = attn_seg_q8;
  t.attn_seg_q4 = attn_seg_q4;
}

}  // namespace pllm::kern
