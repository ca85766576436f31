// Scalar twins of the KV-cache segment kernels (KernelTable::attn_seg_*): plain loops,
// dot products and the accumulator in double inside a call, std::exp; the carried state
// (AttnAccum) is f32 between calls. Same chunked online softmax as the SIMD versions
// (scores of up to kChunk tokens, one rescale per chunk, then exp and accumulate), so
// this file doubles as the readable specification of what they compute.
//
// Scores are rounded to f32 before the maximum is taken: the running maximum is then
// exactly representable in AttnAccum::m, so a later segment weighs its tokens against
// the same maximum the earlier ones were weighed with.
#include <cmath>
#include <cstdint>

#include "base/fp16.h"
#include "kernels/internal.h"

namespace pllm::kern {

namespace {

constexpr int kChunk = kAttnChunk;  // tokens per online-softmax step (kv_format.h)

// Folds n tokens into `a`. Src provides score(t) -> f32 scaled score (soft-capped here when
// softcap > 0, in double, then rounded to f32) and
// add_value(t, p, acc): acc[d] += p * v_t[d] in double. The state is rounded to `a`'s floats
// after every chunk, as the SIMD kernels keep it: a segment split at a chunk boundary into two
// calls then gives the same result (KvCache::attend_rows).
template <class Src>
void fold_segment(const Src& src, int n, int hd, float softcap, AttnAccum& a) {
  float s[kChunk];
  for (int t0 = 0; t0 < n; t0 += kChunk) {
    double acc[kMaxHeadDim];
    for (int d = 0; d < hd; ++d) acc[d] = a.acc[d];
    float m = a.m;
    double l = a.l;
    const int cn = n - t0 < kChunk ? n - t0 : kChunk;
    float cm = -INFINITY;
    for (int j = 0; j < cn; ++j) {
      s[j] = src.score(t0 + j);
      if (softcap > 0.0f) s[j] = float(double(softcap) * std::tanh(double(s[j]) / double(softcap)));
      if (s[j] > cm) cm = s[j];
    }
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const double r = std::exp(double(m) - double(cm));
      for (int d = 0; d < hd; ++d) acc[d] *= r;
      l *= r;
      m = cm;
    }
    for (int j = 0; j < cn; ++j) {
      const double p = std::exp(double(s[j]) - double(m));
      l += p;
      src.add_value(t0 + j, p, acc);
    }
    a.m = m;
    a.l = float(l);
    for (int d = 0; d < hd; ++d) a.acc[d] = float(acc[d]);
  }
}

inline double load_d(const float* p, int64_t i) { return p[i]; }
inline double load_d(const uint16_t* p, int64_t i) { return fp16_to_fp32(p[i]); }

template <class T>
struct PlainSrc {  // f32 / f16 cache rows
  const float* q;
  const T* k;
  const T* v;
  int64_t stride;
  int hd;
  float scale;
  float score(int t) const {
    double dot = 0.0;
    for (int d = 0; d < hd; ++d) dot += double(q[d]) * load_d(k + t * stride, d);
    return float(dot * double(scale));
  }
  void add_value(int t, double p, double* acc) const {
    for (int d = 0; d < hd; ++d) acc[d] += p * load_d(v + t * stride, d);
  }
};

struct Q8Src {
  const int8_t* qi;  // the query quantised like the cache: int8 per group of 64
  const float* dq;   // its scales
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, scale_stride;
  int hd;
  float scale;
  float score(int t) const {
    const int8_t* kt = k + t * stride;
    double s = 0.0;
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      int32_t isum = 0;  // exact
      for (int i = g * kKvQ8Group; i < (g + 1) * kKvQ8Group; ++i) isum += int32_t(qi[i]) * int32_t(kt[i]);
      s += double(dq[g]) * double(ks[t * scale_stride + g]) * double(isum);
    }
    return float(s * double(scale));
  }
  void add_value(int t, double p, double* acc) const {
    const int8_t* vt = v + t * stride;
    const float* st = vs + t * scale_stride;
    for (int d = 0; d < hd; ++d) acc[d] += p * double(float(vt[d]) * st[d / kKvQ8Group]);  // = kv_dequantize_q8
  }
};

struct Q4Src {
  const float* q;
  const KvQ4GroupView* g;
  int t0;  // group token of the segment's first token
  int hd;
  float scale;
  float score(int t) const {
    float k[kMaxHeadDim];
    kv_dequantize_q4_key(g->k_codes, g->code_stride, g->k_scale, g->k_min, t0 + t, hd, k);
    double dot = 0.0;
    for (int d = 0; d < hd; ++d) dot += double(q[d]) * double(k[d]);
    return float(dot * double(scale));
  }
  void add_value(int t, double p, double* acc) const {
    const int64_t tt = t0 + t;
    float v[kMaxHeadDim];
    kv_dequantize_q4_values(g->v_codes + tt * g->code_stride, g->v_scale + tt * g->vs_stride,
                            g->v_min + tt * g->vs_stride, hd, v);
    for (int d = 0; d < hd; ++d) acc[d] += p * double(v[d]);
  }
};

// Several query heads: each is folded on its own, exactly as one call per head would
// (the SIMD kernels share the loads and decoding of the cache between the heads).
void attn_seg_f32(const float* q, int n_q, const float* k, const float* v, int64_t stride, int n, int hd,
                  AttnScore sc, AttnAccum* a) {
  for (int h = 0; h < n_q; ++h)
    fold_segment(PlainSrc<float>{q + h * hd, k, v, stride, hd, sc.scale}, n, hd, sc.softcap, a[h]);
}

void attn_seg_f16(const float* q, int n_q, const uint16_t* k, const uint16_t* v, int64_t stride, int n, int hd,
                  AttnScore sc, AttnAccum* a) {
  for (int h = 0; h < n_q; ++h)
    fold_segment(PlainSrc<uint16_t>{q + h * hd, k, v, stride, hd, sc.scale}, n, hd, sc.softcap, a[h]);
}

void attn_seg_q8(const float* q, int n_q, const int8_t* k, const float* k_scale, const int8_t* v,
                 const float* v_scale, int64_t stride, int64_t scale_stride, int n, int hd, AttnScore sc,
                 AttnAccum* a) {
  if (n <= 0) return;
  for (int h = 0; h < n_q; ++h) {
    int8_t qi[kMaxHeadDim];
    float dq[kMaxHeadDim / kKvQ8Group];
    kv_quantize_q8(q + h * hd, hd, qi, dq);  // the query in the cache's own format (same rounding rule)
    fold_segment(Q8Src{qi, dq, k, k_scale, v, v_scale, stride, scale_stride, hd, sc.scale}, n, hd, sc.softcap, a[h]);
  }
}

void attn_seg_q4(const float* q, int n_q, const KvQ4GroupView& g, int t0, int t1, int hd, AttnScore sc,
                 AttnAccum* a) {
  for (int h = 0; h < n_q; ++h) fold_segment(Q4Src{q + h * hd, &g, t0, hd, sc.scale}, t1 - t0, hd, sc.softcap, a[h]);
}

}  // namespace

void fill_attention_kv_scalar(KernelTable& t) {
  t.attn_seg_f32 = attn_seg_f32;
  t.attn_seg_f16 = attn_seg_f16;
  t.attn_seg_q8 = attn_seg_q8;
  t.attn_seg_q4 = attn_seg_q4;
}

}  // namespace pllm::kern
