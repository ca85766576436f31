// NEON (AArch64 Advanced SIMD, baseline ARMv8.0) KV-cache segment kernels
// (KernelTable::attn_seg_*): the chunked online softmax of
// generic/attention_kv_scalar.cpp for n_q query heads sharing one kv head, with the cache
// decoded in registers; same structure as x86/attention_kv_avx2.cpp with 4-lane registers:
//   scores 4 tokens at a time for every head, four accumulators per token (16 partial
//   sums) and one pairwise-add reduction for all four (with several heads the block's f16
//   / q4 key rows are decoded once into a small f32 tile; a partial last block re-reads
//   the chunk's last row and masks those lanes to -inf); per head one rescale per chunk
//   and a vectorised exp; acc_h += p_ht v_t in blocks of 16 output dims for up to 4 heads
//   at once, each value row decoded once per block of heads.
//   q8: each query quantised once per call like kv_quantize_q8 (FCVTNS rounds to nearest
//       even); q.k with SMULL/SMLAL2 (two products <= 2 * 127 * 127 fit int16) and
//       SADALP into int32: exact. Baseline ARMv8.0 only, so both NEON tables use it.
//   q4: keys as q'.code + bias (q'_c = q_c * k_scale_c, bias = sum q_c * k_min_c, once
//       per call and head); values as (p_t * scale_tb) * code plus sum_t p_t * min_tb.
//
// Shared: simd_neon.h, drivers/attn_seg.h (the softmax loop, the value accumulation, the
// f32 / f16 source and the q4 query constants).
#include <arm_neon.h>

#include <cstdint>

#include "kernels/drivers/attn_seg.h"
#include "kernels/internal.h"
#include "kernels/arm/simd_neon.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

using neon::h2f;
using neon::s8_to_f32;
using neon::u8_to_f32;

constexpr int kChunk = kAttnChunk;  // tokens per online-softmax step (kv_format.h)
constexpr int kMaxQ = drivers::kAttnMaxQ;    // query heads per call
constexpr int kQGroups = kMaxHeadDim / kKvQ8Group;  // q8 scale groups per query head

// exp(x) for x <= 0; see x86/attention_kv_avx2.cpp. x < -87 (incl. -inf) gives 0.
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

// Codes of 32 channels (16 bytes, ggml nibble order) -> 8 x f32x4 in channel order.
PLLM_AI void q4_decode32(const uint8_t* p, float32x4_t* f) {
  const uint8x16_t b = vld1q_u8(p);
  u8_to_f32(vandq_u8(b, vdupq_n_u8(0x0F)), f);
  u8_to_f32(vshrq_n_u8(b, 4), f + 4);
}

// The vector traits of the drivers (online_softmax.h, attn_values.h, attn_seg.h).
struct AttnSimd : neon::F32x4 {
  static constexpr int kDotChains = 4;  // four chains per key row: 4 rows, 16 chains
  static constexpr int kPlainVecs = 4;  // values in blocks of 16 dims
  // Two tokens per step for one or two heads (32 registers).
  static constexpr int tokens_per_step(int vecs) { return vecs <= 8 ? 2 : 1; }
  static PLLM_AI V exp_neg(V x) { return pllm::kern::exp_neg(x); }
  static PLLM_AI V keep_first(V x, int k, V fill) {
    const int32x4_t iota = {0, 1, 2, 3};
    return vbslq_f32(vcgtq_s32(vdupq_n_s32(k), iota), x, fill);
  }
  static PLLM_AI V reduce(const V* v) { return reduce4(v); }
  static PLLM_AI void q4_codes32(const uint8_t* p, V* c) { q4_decode32(p, c); }
};

// ---- q8 ----
// acc (4 x int32) += pairwise sums of q * k over 16 bytes.
PLLM_AI int32x4_t dot16_i8(int32x4_t acc, int8x16_t q, int8x16_t k) {
  const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(q), vget_low_s8(k)), q, k);
  return vpadalq_s16(acc, p);
}

struct Q8Src {
  static constexpr bool kScaled = true, kAffine = false;
  const int8_t* qi;  // query codes, head h at qi + h * kMaxHeadDim
  const float* dq;   // query scale per head and group, [h * kQGroups + g]
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, sstride;
  int hd;

  PLLM_AI void scores(int t0, const int* row, int n_q, float* s) const {
    const int8_t* kr[4];
    const float* sr[4];
    for (int i = 0; i < 4; ++i) {
      kr[i] = k + (t0 + row[i]) * stride;
      sr[i] = ks + (t0 + row[i]) * sstride;
    }
    for (int h = 0; h < n_q; ++h) {
      float32x4_t sc = vdupq_n_f32(0.0f);
      for (int g = 0; g < hd / kKvQ8Group; ++g) {
        const int8_t* qg = qi + h * kMaxHeadDim + g * kKvQ8Group;
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
        sc = vfmaq_f32(sc, vcvtq_f32_s32(isum), vmulq_n_f32(dk, dq[h * kQGroups + g]));
      }
      vst1q_f32(s + h * kChunk, sc);
    }
  }

  // 16 dims of one 64-channel group, weight p_t * scale_tg.
  template <int NV>
  PLLM_AI void vrow(int t, int d, float32x4_t* x, float& mul, float&) const {
    static_assert(NV == 4, "16 dims");
    mul = vs[t * sstride + d / kKvQ8Group];
    s8_to_f32(vld1q_s8(v + t * stride + d), x);
  }

  void accumulate(int t0, const float* p, int cn, int n_q, AttnAccum* a) const {
    drivers::accumulate_values<AttnSimd, 4>(*this, t0, p, cn, n_q, hd, a);
  }
};

// ---- q4 ----
struct Q4Src : drivers::Q4Data {
  PLLM_AI void scores(int t0, const int* row, int n_q, float* s) const {
    t0 += base;
    const uint8_t* kr[4];
    for (int i = 0; i < 4; ++i) kr[i] = g->k_codes + (t0 + row[i]) * g->code_stride;
    if (n_q > 1) return drivers::q4_scores_tiled<AttnSimd>(kr, qp, bias, n_q, hd, s);
    // One head: the codes decoded inside the dot product, two chains per row.
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
    float32x4_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = vaddq_f32(a[i][0], a[i][1]);
    vst1q_f32(s, vaddq_f32(reduce4(sc), vdupq_n_f32(bias[0])));
  }

  // 16 channels of one 32-channel block (low nibbles for its first half, high for the
  // second), weight p_t * scale_tb, plus p_t * min_tb.
  template <int NV>
  PLLM_AI void vrow(int t, int d, float32x4_t* x, float& mul, float& add) const {
    static_assert(NV == 4, "16 dims");
    const int64_t tt = base + t;
    const int b = d / 32;
    mul = h2f(g->v_scale[tt * g->vs_stride + b]);
    add = h2f(g->v_min[tt * g->vs_stride + b]);
    const uint8x16_t c = vld1q_u8(g->v_codes + tt * g->code_stride + 16 * b);
    u8_to_f32((d & 16) ? vshrq_n_u8(c, 4) : vandq_u8(c, vdupq_n_u8(0x0F)), x);
  }

  void accumulate(int t0, const float* p, int cn, int n_q, AttnAccum* a) const {
    drivers::accumulate_values<AttnSimd, 4>(*this, t0, p, cn, n_q, hd, a);
  }
};

void attn_seg_q8(const float* q, int n_q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, int64_t stride, int64_t scale_stride, int n, int hd, AttnScore score,
                 AttnAccum* a) {
  if (n <= 0) return;
  // Each query in the cache's format, as kv_quantize_q8 does it: scale amax / 127 (a true
  // division), codes round-to-nearest-even of q / scale, an all-zero group gets codes 0.
  alignas(16) int8_t qi[kMaxQ * kMaxHeadDim];
  float dq[kMaxQ * kQGroups];
  for (int h = 0; h < n_q; ++h)
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const float* qg = q + h * hd + g * kKvQ8Group;
      float32x4_t x[16], amax = vdupq_n_f32(0.0f);
      for (int c = 0; c < 16; ++c) {
        x[c] = vld1q_f32(qg + 4 * c);
        amax = vmaxq_f32(amax, vabsq_f32(x[c]));
      }
      const float s = vmaxvq_f32(amax) / 127.0f;
      dq[h * kQGroups + g] = s;
      for (int c = 0; c < 16; c += 2) {
        int32x4_t c0 = vdupq_n_s32(0), c1 = c0;
        if (s != 0.0f) {
          const float32x4_t vs = vdupq_n_f32(s);
          c0 = vcvtnq_s32_f32(vdivq_f32(x[c], vs));
          c1 = vcvtnq_s32_f32(vdivq_f32(x[c + 1], vs));
        }
        int8x8_t b = vqmovn_s16(vcombine_s16(vqmovn_s32(c0), vqmovn_s32(c1)));
        b = vmax_s8(b, vdup_n_s8(-127));
        vst1_s8(qi + h * kMaxHeadDim + g * kKvQ8Group + 4 * c, b);
      }
    }
  drivers::fold_segment<AttnSimd>(Q8Src{qi, dq, k, k_scale, v, v_scale, stride, scale_stride, hd}, n_q, n, hd, score, a);
}

#undef PLLM_AI

}  // namespace

void fill_attention_kv_neon(KernelTable& t) { drivers::set_attn_seg<AttnSimd, Q4Src>(t, attn_seg_q8); }

}  // namespace pllm::kern
