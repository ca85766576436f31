// Store side of the compressed KV cache (kv_format.h): scalar quantisers and
// dequantisers, run once per token (q8, q4 values) or once per full group (q4 keys).
// They define the formats: the attention kernels decode exactly what these write.
//
// Rounding: codes are round-to-nearest-even of x / scale (std::nearbyint in the default
// rounding mode), the same rule the q8 attention kernels use for the query. q4 scale and
// min are rounded to fp16 FIRST and the codes are computed against the rounded values, so
// the round-trip error is scale/2 plus only what fp16 rounding of min (and of the top
// end min + 15 * scale, through the clamp) adds. Dequantisation is an f32 multiply then
// add (the library is built with -ffp-contract=off, so never fused): every ISA decodes
// to the same floats.
#include <cmath>
#include <cstdint>

#include "base/fp16.h"
#include "kernels/kv_format.h"

namespace pllm {

namespace {

// Byte and nibble of channel c in a q4 row (ggml Q4_0 order within 32-channel blocks).
inline int q4_byte(int c) { return 16 * (c / 32) + (c % 16); }
inline int q4_shift(int c) { return (c % 32) < 16 ? 0 : 4; }
inline int q4_code(const uint8_t* row, int c) { return (row[q4_byte(c)] >> q4_shift(c)) & 15; }

// Asymmetric 4-bit parameters for values in [mn, mx]: fp16 scale/min. A degenerate
// range (max == min, or a scale too small for fp16) stores scale 0: everything decodes
// to min.
struct Q4Params {
  uint16_t scale_h, min_h;
  float scale, min;
};
inline Q4Params q4_params(float mn, float mx) {
  Q4Params p;
  p.min_h = fp32_to_fp16(mn);
  p.min = fp16_to_fp32(p.min_h);
  p.scale_h = mx > mn ? fp32_to_fp16((mx - mn) / 15.0f) : uint16_t(0);
  p.scale = fp16_to_fp32(p.scale_h);
  if (!(p.scale > 0.0f)) {  // zero (or flushed) scale
    p.scale_h = 0;
    p.scale = 0.0f;
  }
  return p;
}
inline int q4_quantize(float x, const Q4Params& p) {
  if (p.scale == 0.0f) return 0;
  const float c = std::nearbyint((x - p.min) / p.scale);
  return c < 0.0f ? 0 : (c > 15.0f ? 15 : int(c));
}

}  // namespace

void kv_quantize_q8(const float* x, int n, int8_t* codes, float* scales) {
  for (int g = 0; g < n / kKvQ8Group; ++g) {
    const float* xg = x + g * kKvQ8Group;
    int8_t* cg = codes + g * kKvQ8Group;
    float amax = 0.0f;
    for (int i = 0; i < kKvQ8Group; ++i) amax = std::fmax(amax, std::fabs(xg[i]));
    const float s = amax / 127.0f;
    scales[g] = s;
    for (int i = 0; i < kKvQ8Group; ++i) {
      if (s == 0.0f) {  // all-zero group (or amax so small that amax / 127 underflows)
        cg[i] = 0;
        continue;
      }
      float c = std::nearbyint(xg[i] / s);
      c = c > 127.0f ? 127.0f : (c < -127.0f ? -127.0f : c);
      cg[i] = int8_t(c);
    }
  }
}

void kv_dequantize_q8(const int8_t* codes, const float* scales, int n, float* y) {
  for (int i = 0; i < n; ++i) y[i] = float(codes[i]) * scales[i / kKvQ8Group];
}

void kv_quantize_q4_values(const float* x, int n, uint8_t* codes, uint16_t* scale, uint16_t* min) {
  for (int b = 0; b < n / kKvQ4ValueBlock; ++b) {
    const float* xb = x + b * kKvQ4ValueBlock;
    float mn = xb[0], mx = xb[0];
    for (int i = 1; i < kKvQ4ValueBlock; ++i) {
      mn = std::fmin(mn, xb[i]);
      mx = std::fmax(mx, xb[i]);
    }
    const Q4Params p = q4_params(mn, mx);
    scale[b] = p.scale_h;
    min[b] = p.min_h;
    uint8_t* cb = codes + 16 * b;
    for (int i = 0; i < 16; ++i) cb[i] = uint8_t(q4_quantize(xb[i], p) | q4_quantize(xb[i + 16], p) << 4);
  }
}

void kv_dequantize_q4_values(const uint8_t* codes, const uint16_t* scale, const uint16_t* min, int n, float* y) {
  for (int c = 0; c < n; ++c) {
    const int b = c / kKvQ4ValueBlock;
    y[c] = fp16_to_fp32(min[b]) + fp16_to_fp32(scale[b]) * float(q4_code(codes, c));
  }
}

void kv_quantize_q4_keys(const uint16_t* x, int64_t x_stride, int n, uint8_t* codes, int64_t code_stride,
                         uint16_t* k_scale, uint16_t* k_min) {
  for (int t = 0; t < kKvQ4GroupTokens; ++t)
    for (int i = 0; i < n / 2; ++i) codes[t * code_stride + i] = 0;
  for (int c = 0; c < n; ++c) {
    float mn = fp16_to_fp32(x[c]), mx = mn;
    for (int t = 1; t < kKvQ4GroupTokens; ++t) {
      const float v = fp16_to_fp32(x[t * x_stride + c]);
      mn = std::fmin(mn, v);
      mx = std::fmax(mx, v);
    }
    const Q4Params p = q4_params(mn, mx);
    k_scale[c] = p.scale_h;
    k_min[c] = p.min_h;
    for (int t = 0; t < kKvQ4GroupTokens; ++t) {
      const int code = q4_quantize(fp16_to_fp32(x[t * x_stride + c]), p);
      codes[t * code_stride + q4_byte(c)] |= uint8_t(code << q4_shift(c));
    }
  }
}

void kv_dequantize_q4_key(const uint8_t* codes, int64_t code_stride, const uint16_t* k_scale,
                          const uint16_t* k_min, int t, int n, float* y) {
  const uint8_t* row = codes + t * code_stride;
  for (int c = 0; c < n; ++c) y[c] = fp16_to_fp32(k_min[c]) + fp16_to_fp32(k_scale[c]) * float(q4_code(row, c));
}

}  // namespace pllm
