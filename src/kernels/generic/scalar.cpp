// The scalar twins: plain loops that define what every SIMD kernel must compute.
//
// Integer parts are computed exactly in int; the per-block float terms are
// accumulated in double, so these results are (almost) the exact dot product of the
// dequantised weight and the dequantised activation. SIMD versions accumulate in
// f32 and are compared against these with a tolerance (tests/cpp/test_kernels.cpp).
#include <cstring>

#include "base/fp16.h"
#include "kernels/drivers/delta_rule.h"
#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/reference.h"

namespace pllm::kern {

namespace {

// ------------------------------------------------------------ activation formats
size_t act_bytes_f32(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }
size_t act_bytes_q8_0(int64_t n) { return static_cast<size_t>(n / QK8_0) * sizeof(block_q8_0); }
size_t act_bytes_q8_1(int64_t n) { return static_cast<size_t>(n / QK8_1) * sizeof(block_q8_1); }
size_t act_bytes_q8_K(int64_t n) { return static_cast<size_t>(n / QK_K) * sizeof(block_q8_K); }

void quantize_act_f32(const float* x, void* xq, int64_t n) {
  std::memcpy(xq, x, static_cast<size_t>(n) * sizeof(float));
}
void quantize_act_q8_0(const float* x, void* xq, int64_t n) {
  ref::quantize_row_q8_0(x, static_cast<block_q8_0*>(xq), n);
}
void quantize_act_q8_1(const float* x, void* xq, int64_t n) {
  ref::quantize_row_q8_1(x, static_cast<block_q8_1*>(xq), n);
}
void quantize_act_q8_K(const float* x, void* xq, int64_t n) {
  ref::quantize_row_q8_K(x, static_cast<block_q8_K*>(xq), n);
}
void quantize_act_static_q8_0(const float* x, void* xq, int64_t n, float d) {
  ref::quantize_row_q8_0_static(x, static_cast<block_q8_0*>(xq), n, d);
}
void quantize_act_static_q8_1(const float* x, void* xq, int64_t n, float d) {
  ref::quantize_row_q8_1_static(x, static_cast<block_q8_1*>(xq), n, d);
}
void quantize_act_static_q8_K(const float* x, void* xq, int64_t n, float d) {
  ref::quantize_row_q8_K_static(x, static_cast<block_q8_K*>(xq), n, d);
}

// ------------------------------------------------------------ dequantize
void dequant_f32(const void* w, float* y, int64_t n) {
  std::memcpy(y, w, static_cast<size_t>(n) * sizeof(float));
}
void dequant_f16(const void* w, float* y, int64_t n) {
  ref::dequantize_row_f16(static_cast<const uint16_t*>(w), y, n);
}
void dequant_bf16(const void* w, float* y, int64_t n) {
  ref::dequantize_row_bf16(static_cast<const uint16_t*>(w), y, n);
}
void dequant_q4_0(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q4_0(static_cast<const block_q4_0*>(w), y, n);
}
void dequant_q4_1(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q4_1(static_cast<const block_q4_1*>(w), y, n);
}
void dequant_q5_0(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q5_0(static_cast<const block_q5_0*>(w), y, n);
}
void dequant_q5_1(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q5_1(static_cast<const block_q5_1*>(w), y, n);
}
void dequant_q8_0(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q8_0(static_cast<const block_q8_0*>(w), y, n);
}
void dequant_q4_K(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q4_K(static_cast<const block_q4_K*>(w), y, n);
}
void dequant_q6_K(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q6_K(static_cast<const block_q6_K*>(w), y, n);
}
void dequant_q2_K(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q2_K(static_cast<const block_q2_K*>(w), y, n);
}
void dequant_q3_K(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q3_K(static_cast<const block_q3_K*>(w), y, n);
}
void dequant_q5_K(const void* w, float* y, int64_t n) {
  ref::dequantize_row_q5_K(static_cast<const block_q5_K*>(w), y, n);
}
void dequant_iq4_nl(const void* w, float* y, int64_t n) {
  ref::dequantize_row_iq4_nl(static_cast<const block_iq4_nl*>(w), y, n);
}
void dequant_iq4_xs(const void* w, float* y, int64_t n) {
  ref::dequantize_row_iq4_xs(static_cast<const block_iq4_xs*>(w), y, n);
}

// ------------------------------------------------------------ float weights
float vec_dot_f32(int64_t n, const void* w, const void* xq) {
  const float* a = static_cast<const float*>(w);
  const float* x = static_cast<const float*>(xq);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * x[i];
  return static_cast<float>(acc);
}
float vec_dot_f16(int64_t n, const void* w, const void* xq) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const float* x = static_cast<const float*>(xq);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(fp16_to_fp32(a[i])) * x[i];
  return static_cast<float>(acc);
}
float vec_dot_bf16(int64_t n, const void* w, const void* xq) {
  const uint16_t* a = static_cast<const uint16_t*>(w);
  const float* x = static_cast<const float*>(xq);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(bf16_to_fp32(a[i])) * x[i];
  return static_cast<float>(acc);
}

// ------------------------------------------------------------ W4A8 / W8A8
float vec_dot_q4_0(int64_t n, const void* w_row, const void* xq) {
  const block_q4_0* w = static_cast<const block_q4_0*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += ((w[b].qs[j] & 0xF) - 8) * a[b].qs[j];
      sumi += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
    }
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * fp16_to_fp32(a[b].d) * sumi;
  }
  return static_cast<float>(acc);
}

float vec_dot_q4_1(int64_t n, const void* w_row, const void* xq) {
  const block_q4_1* w = static_cast<const block_q4_1*>(w_row);
  const block_q8_1* a = static_cast<const block_q8_1*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK4_1; ++b) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      sumi += (w[b].qs[j] & 0xF) * a[b].qs[j];
      sumi += (w[b].qs[j] >> 4) * a[b].qs[j + 16];
    }
    // sum_j (d q_j + m) a_d a_j = d a_d sumi + m * (a_d * sum a_j) = ... + m * s
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * a[b].d * sumi;
    acc += static_cast<double>(fp16_to_fp32(w[b].m)) * a[b].s;
  }
  return static_cast<float>(acc);
}

// The 5-bit quant of element j (0..31) of a Q5_0 / Q5_1 block.
inline int q5(const uint8_t* qs, const uint8_t* qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return lo | (((qh[j / 8] >> (j % 8)) & 1) << 4);
}

float vec_dot_q5_0(int64_t n, const void* w_row, const void* xq) {
  const block_q5_0* w = static_cast<const block_q5_0*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK5_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < QK5_0; ++j) sumi += (q5(w[b].qs, w[b].qh, j) - 16) * a[b].qs[j];
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * fp16_to_fp32(a[b].d) * sumi;
  }
  return static_cast<float>(acc);
}

float vec_dot_q5_1(int64_t n, const void* w_row, const void* xq) {
  const block_q5_1* w = static_cast<const block_q5_1*>(w_row);
  const block_q8_1* a = static_cast<const block_q8_1*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK5_1; ++b) {
    int sumi = 0;
    for (int j = 0; j < QK5_1; ++j) sumi += q5(w[b].qs, w[b].qh, j) * a[b].qs[j];
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * a[b].d * sumi;
    acc += static_cast<double>(fp16_to_fp32(w[b].m)) * a[b].s;  // as Q4_1
  }
  return static_cast<float>(acc);
}

float vec_dot_q8_0(int64_t n, const void* w_row, const void* xq) {
  const block_q8_0* w = static_cast<const block_q8_0*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < QK8_0; ++j) sumi += w[b].qs[j] * a[b].qs[j];
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * fp16_to_fp32(a[b].d) * sumi;
  }
  return static_cast<float>(acc);
}

float vec_dot_q4_K(int64_t n, const void* w_row, const void* xq) {
  const block_q4_K* w = static_cast<const block_q4_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sumi = 0;  // sum_j sc_j * dot(q, a) over sub-block j
    int summ = 0;  // sum_j m_j * sum(a) over sub-block j
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ref::get_scale_min_k4(j, w[b].scales, &sc, &m);
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int dot = 0;
      for (int l = 0; l < 32; ++l) dot += ((q[l] >> shift) & 0xF) * a[b].qs[32 * j + l];
      sumi += sc * dot;
      summ += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    const double da = a[b].d;
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * da * sumi;
    acc -= static_cast<double>(fp16_to_fp32(w[b].dmin)) * da * summ;
  }
  return static_cast<float>(acc);
}

float vec_dot_q6_K(int64_t n, const void* w_row, const void* xq) {
  const block_q6_K* w = static_cast<const block_q6_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int q[QK_K];  // signed 6-bit values in natural element order
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      int* y = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y[l] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        y[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      }
    }
    int sumi = 0;
    for (int e = 0; e < QK_K; ++e) sumi += w[b].scales[e / 16] * q[e] * a[b].qs[e];
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * a[b].d * sumi;
  }
  return static_cast<float>(acc);
}

// The 2-bit field of element e of a Q2_K / Q3_K block (128-element halves, 32-byte groups of qs).
inline int q2_bits(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Q2_K: sum_i (d sc_i) sum_16 q a - dmin m_i sum_16 a, the sub-block sums of a being Q8_K's bsums.
float vec_dot_q2_K(int64_t n, const void* w_row, const void* xq) {
  const block_q2_K* w = static_cast<const block_q2_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sumi = 0, summ = 0;
    for (int i = 0; i < 16; ++i) {
      int dot = 0;
      for (int e = 16 * i; e < 16 * i + 16; ++e) dot += q2_bits(w[b].qs, e) * a[b].qs[e];
      sumi += (w[b].scales[i] & 0xF) * dot;
      summ += (w[b].scales[i] >> 4) * a[b].bsums[i];
    }
    const double da = a[b].d;
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * da * sumi;
    acc -= static_cast<double>(fp16_to_fp32(w[b].dmin)) * da * summ;
  }
  return static_cast<float>(acc);
}

float vec_dot_q3_K(int64_t n, const void* w_row, const void* xq) {
  const block_q3_K* w = static_cast<const block_q3_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int8_t sc[16];
    ref::q3_K_scales(w[b].scales, sc);
    int sumi = 0;
    for (int e = 0; e < QK_K; ++e) {
      const int high = (w[b].hmask[e % 32] >> (e / 32)) & 1;  // bit 4h + j of hmask[l]
      sumi += sc[e / 16] * (q2_bits(w[b].qs, e) - (high ? 0 : 4)) * a[b].qs[e];
    }
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * a[b].d * sumi;
  }
  return static_cast<float>(acc);
}

float vec_dot_q5_K(int64_t n, const void* w_row, const void* xq) {
  const block_q5_K* w = static_cast<const block_q5_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sumi = 0, summ = 0;  // as Q4_K, with the fifth bit
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ref::get_scale_min_k4(j, w[b].scales, &sc, &m);
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int dot = 0;
      for (int l = 0; l < 32; ++l)
        dot += (((q[l] >> shift) & 0xF) | (((w[b].qh[l] >> j) & 1) << 4)) * a[b].qs[32 * j + l];
      sumi += sc * dot;
      summ += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    const double da = a[b].d;
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * da * sumi;
    acc -= static_cast<double>(fp16_to_fp32(w[b].dmin)) * da * summ;
  }
  return static_cast<float>(acc);
}

// The IQ4 level of nibble j (0..31 in element order) of 16 packed bytes.
inline int iq4(const uint8_t* qs, int j) { return kIq4nlValues[j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4]; }

float vec_dot_iq4_nl(int64_t n, const void* w_row, const void* xq) {
  const block_iq4_nl* w = static_cast<const block_iq4_nl*>(w_row);
  const block_q8_0* a = static_cast<const block_q8_0*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += iq4(w[b].qs, j) * a[b].qs[j];
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * fp16_to_fp32(a[b].d) * sumi;
  }
  return static_cast<float>(acc);
}

float vec_dot_iq4_xs(int64_t n, const void* w_row, const void* xq) {
  const block_iq4_xs* w = static_cast<const block_iq4_xs*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  double acc = 0.0;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int sumi = 0;
    for (int j = 0; j < 8; ++j) {
      int dot = 0;
      for (int l = 0; l < 32; ++l) dot += iq4(w[b].qs + 16 * j, l) * a[b].qs[32 * j + l];
      sumi += (ref::iq4_xs_scale(w[b], j) - 32) * dot;
    }
    acc += static_cast<double>(fp16_to_fp32(w[b].d)) * a[b].d * sumi;
  }
  return static_cast<float>(acc);
}

// ------------------------------------------------------------ exact mode (f32 activations)
// Decode Chunk elements at a time with the reference dequantiser (so the weights are
// exactly dequantize_row's floats), then accumulate w * x in double for up to 8 rows
// at once. The only error is the final rounding to float (plus ~n * 2^-53 relative).
// Chunk is the block size for quantised types; float types use 32 with a short tail.
template <int Chunk, size_t ChunkBytes, void (*Deq)(const void*, float*, int64_t)>
void vec_dot_f32_multi_t(int64_t n, const void* w_row, const float* x, int64_t x_stride, int n_x, float* out,
                         int64_t out_stride) {
  const uint8_t* w = static_cast<const uint8_t*>(w_row);
  float buf[Chunk];
  for (int j0 = 0; j0 < n_x; j0 += 8) {
    const int nx = n_x - j0 < 8 ? n_x - j0 : 8;
    double acc[8] = {};
    for (int64_t i = 0, c = 0; i < n; i += Chunk, ++c) {
      const int64_t len = n - i < Chunk ? n - i : Chunk;
      Deq(w + c * ChunkBytes, buf, len);
      for (int j = 0; j < nx; ++j) {
        const float* xr = x + (j0 + j) * x_stride + i;
        double s = 0.0;
        for (int64_t l = 0; l < len; ++l) s += static_cast<double>(buf[l]) * xr[l];
        acc[j] += s;
      }
    }
    for (int j = 0; j < nx; ++j) out[(j0 + j) * out_stride] = static_cast<float>(acc[j]);
  }
}

template <int Chunk, size_t ChunkBytes, void (*Deq)(const void*, float*, int64_t)>
float vec_dot_f32_one_t(int64_t n, const void* w_row, const float* x) {
  float r;
  vec_dot_f32_multi_t<Chunk, ChunkBytes, Deq>(n, w_row, x, 0, 1, &r, 0);
  return r;
}

template <int Chunk, size_t ChunkBytes, void (*Deq)(const void*, float*, int64_t)>
void set_exact(KernelTable& t, TensorType type) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  k.vec_dot_f32 = vec_dot_f32_one_t<Chunk, ChunkBytes, Deq>;
  k.vec_dot_f32_multi = vec_dot_f32_multi_t<Chunk, ChunkBytes, Deq>;
}

void set(KernelTable& t, TensorType type, TensorType act, size_t (*bytes)(int64_t),
         void (*quant)(const float*, void*, int64_t), float (*dot)(int64_t, const void*, const void*),
         void (*deq)(const void*, float*, int64_t)) {
  TypeKernels& k = t.types[static_cast<uint32_t>(type) & 31];
  k.available = true;
  k.act_type = act;
  k.act_bytes = bytes;
  k.quantize_act = quant;
  k.vec_dot = dot;
  k.dequantize_row = deq;
}

void swiglu_scalar(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + __builtin_expf(-g[i])) * u[i];
}

void geglu_scalar(const float* g, const float* u, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i], y2 = -1.5957691216057308f * (x + 0.044715f * x * x * x);  // -2 sqrt(2/pi) (...)
    out[i] = x / (1.0f + __builtin_expf(y2)) * u[i];
  }
}

// drivers/delta_rule.h with 32 one-float registers: the canonical order written out.
struct DeltaRuleScalar {
  static constexpr int kLanes = 1;
  using V = float;
  static V zero() { return 0.0f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V fma(V acc, V a, V b) { return std::fma(a, b, acc); }
  static float hsum(V v) { return v; }
};

}  // namespace

void fill_scalar(KernelTable& t) {
  t = KernelTable{};
  t.isa = Isa::scalar;
  using T = TensorType;
  set(t, T::F32, T::F32, act_bytes_f32, quantize_act_f32, vec_dot_f32, dequant_f32);
  set(t, T::F16, T::F32, act_bytes_f32, quantize_act_f32, vec_dot_f16, dequant_f16);
  set(t, T::BF16, T::F32, act_bytes_f32, quantize_act_f32, vec_dot_bf16, dequant_bf16);
  set(t, T::Q4_0, T::Q8_0, act_bytes_q8_0, quantize_act_q8_0, vec_dot_q4_0, dequant_q4_0);
  set(t, T::Q4_1, T::Q8_1, act_bytes_q8_1, quantize_act_q8_1, vec_dot_q4_1, dequant_q4_1);
  set(t, T::Q5_0, T::Q8_0, act_bytes_q8_0, quantize_act_q8_0, vec_dot_q5_0, dequant_q5_0);
  set(t, T::Q5_1, T::Q8_1, act_bytes_q8_1, quantize_act_q8_1, vec_dot_q5_1, dequant_q5_1);
  set(t, T::Q8_0, T::Q8_0, act_bytes_q8_0, quantize_act_q8_0, vec_dot_q8_0, dequant_q8_0);
  set(t, T::Q4_K, T::Q8_K, act_bytes_q8_K, quantize_act_q8_K, vec_dot_q4_K, dequant_q4_K);
  set(t, T::Q6_K, T::Q8_K, act_bytes_q8_K, quantize_act_q8_K, vec_dot_q6_K, dequant_q6_K);
  set(t, T::Q2_K, T::Q8_K, act_bytes_q8_K, quantize_act_q8_K, vec_dot_q2_K, dequant_q2_K);
  set(t, T::Q3_K, T::Q8_K, act_bytes_q8_K, quantize_act_q8_K, vec_dot_q3_K, dequant_q3_K);
  set(t, T::Q5_K, T::Q8_K, act_bytes_q8_K, quantize_act_q8_K, vec_dot_q5_K, dequant_q5_K);
  set(t, T::IQ4_NL, T::Q8_0, act_bytes_q8_0, quantize_act_q8_0, vec_dot_iq4_nl, dequant_iq4_nl);
  set(t, T::IQ4_XS, T::Q8_K, act_bytes_q8_K, quantize_act_q8_K, vec_dot_iq4_xs, dequant_iq4_xs);
  for (TypeKernels& k : t.types) {
    if (!k.available) continue;
    if (k.act_type == T::Q8_0) k.quantize_act_static = quantize_act_static_q8_0;
    if (k.act_type == T::Q8_1) k.quantize_act_static = quantize_act_static_q8_1;
    if (k.act_type == T::Q8_K) k.quantize_act_static = quantize_act_static_q8_K;
  }
  set_exact<32, 32 * sizeof(float), dequant_f32>(t, T::F32);
  set_exact<32, 32 * sizeof(uint16_t), dequant_f16>(t, T::F16);
  set_exact<32, 32 * sizeof(uint16_t), dequant_bf16>(t, T::BF16);
  set_exact<QK4_0, sizeof(block_q4_0), dequant_q4_0>(t, T::Q4_0);
  set_exact<QK4_1, sizeof(block_q4_1), dequant_q4_1>(t, T::Q4_1);
  set_exact<QK5_0, sizeof(block_q5_0), dequant_q5_0>(t, T::Q5_0);
  set_exact<QK5_1, sizeof(block_q5_1), dequant_q5_1>(t, T::Q5_1);
  set_exact<QK8_0, sizeof(block_q8_0), dequant_q8_0>(t, T::Q8_0);
  set_exact<QK_K, sizeof(block_q4_K), dequant_q4_K>(t, T::Q4_K);
  set_exact<QK_K, sizeof(block_q6_K), dequant_q6_K>(t, T::Q6_K);
  set_exact<QK_K, sizeof(block_q2_K), dequant_q2_K>(t, T::Q2_K);
  set_exact<QK_K, sizeof(block_q3_K), dequant_q3_K>(t, T::Q3_K);
  set_exact<QK_K, sizeof(block_q5_K), dequant_q5_K>(t, T::Q5_K);
  set_exact<QK4_0, sizeof(block_iq4_nl), dequant_iq4_nl>(t, T::IQ4_NL);
  set_exact<QK_K, sizeof(block_iq4_xs), dequant_iq4_xs>(t, T::IQ4_XS);
  t.swiglu_f32 = swiglu_scalar;
  t.geglu_f32 = geglu_scalar;
  t.delta_rule_step = drivers::delta_rule_step<DeltaRuleScalar>;
}

}  // namespace pllm::kern
