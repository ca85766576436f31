// Scalar twins of the attention kernels (KernelTable::attn_head_f32/f16): plain
// loops, double accumulation, std::exp. Same chunked single-pass online softmax as
// the SIMD versions, so they double as a readable specification.
#include <cmath>
#include <cstdint>

#include "base/fp16.h"
#include "kernels/internal.h"

namespace pllm::kern {

namespace {

constexpr int kChunk = 64;  // positions per online-softmax step

inline double load_d(const float* p, int i) { return p[i]; }
inline double load_d(const uint16_t* p, int i) { return fp16_to_fp32(p[i]); }

template <class T>
void attn_head(const float* q, const T* k, const T* v, int64_t kv_stride, int n_pos, int head_dim, float scale,
               float* out) {
  if (n_pos <= 0) {
    for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
    return;
  }
  double acc[256];
  double s[kChunk];
  for (int d = 0; d < head_dim; ++d) acc[d] = 0.0;
  double m = -INFINITY, l = 0.0;
  for (int t0 = 0; t0 < n_pos; t0 += kChunk) {
    const int cn = n_pos - t0 < kChunk ? n_pos - t0 : kChunk;
    double cm = -INFINITY;
    for (int j = 0; j < cn; ++j) {
      const T* kt = k + (t0 + j) * kv_stride;
      double dot = 0.0;
      for (int d = 0; d < head_dim; ++d) dot += double(q[d]) * load_d(kt, d);
      s[j] = dot * double(scale);
      if (s[j] > cm) cm = s[j];
    }
    if (cm > m) {  // rescale the running sums to the new maximum (exp(-inf) = 0 at the start)
      const double r = std::exp(m - cm);
      for (int d = 0; d < head_dim; ++d) acc[d] *= r;
      l *= r;
      m = cm;
    }
    for (int j = 0; j < cn; ++j) {
      const double p = std::exp(s[j] - m);
      l += p;
      const T* vt = v + (t0 + j) * kv_stride;
      for (int d = 0; d < head_dim; ++d) acc[d] += p * load_d(vt, d);
    }
  }
  for (int d = 0; d < head_dim; ++d) out[d] = float(acc[d] / l);
}

void attn_head_f32(const float* q, const float* k, const float* v, int64_t kv_stride, int n_pos, int head_dim,
                   float scale, float* out) {
  attn_head(q, k, v, kv_stride, n_pos, head_dim, scale, out);
}

void attn_head_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t kv_stride, int n_pos, int head_dim,
                   float scale, float* out) {
  attn_head(q, k, v, kv_stride, n_pos, head_dim, scale, out);
}

}  // namespace

void fill_attention_scalar(KernelTable& t) {
  t.attn_head_f32 = attn_head_f32;
  t.attn_head_f16 = attn_head_f16;
}

}  // namespace pllm::kern
