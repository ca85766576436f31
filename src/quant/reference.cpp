// Scalar reference quantisers / dequantisers (see reference.h).
#include "quant/reference.h"

#include <cmath>

#include "base/fp16.h"

namespace pllm::ref {

namespace {

inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Round half to even, independent of the current rounding mode's surprises.
inline int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// The static quantisers' rounding: clamp in float first (also maps NaN to the low end
// deterministically), then round half to even.
inline int8_t static_q(float x, float id) {
  const float v = std::fmin(std::fmax(x * id, -127.0f), 127.0f);
  return static_cast<int8_t>(round_even(v));
}

}  // namespace

void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t* q) {
  for (int j = 0; j < K_SCALE_SIZE; ++j) q[j] = 0;
  for (int j = 0; j < 4; ++j) {
    q[j] = sc[j] & 63;
    q[j + 4] = m[j] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    q[j + 4] = uint8_t((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
    q[j - 4] |= uint8_t(((sc[j] >> 4) & 3) << 6);
    q[j] |= uint8_t(((m[j] >> 4) & 3) << 6);
  }
}

// ---------------------------------------------------------------- Q8_0
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < QK8_0; ++j) y[b * QK8_0 + j] = d * static_cast<float>(x[b].qs[j]);
  }
}

// ---------------------------------------------------------------- Q4_0
void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b, x += QK4_0) {
    float amax = 0.0f, max = 0.0f;  // max: the signed value with the largest magnitude
    for (int j = 0; j < QK4_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int q0 = clampi(static_cast<int>(x[j] * id + 8.5f), 0, 15);
      const int q1 = clampi(static_cast<int>(x[j + QK4_0 / 2] * id + 8.5f), 0, 15);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b, y += QK4_0) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[j] = d * static_cast<float>((x[b].qs[j] & 0xF) - 8);
      y[j + QK4_0 / 2] = d * static_cast<float>((x[b].qs[j] >> 4) - 8);
    }
  }
}

// ---------------------------------------------------------------- Q4_1
void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_1; ++b, x += QK4_1) {
    float mn = INFINITY, mx = -INFINITY;
    for (int j = 0; j < QK4_1; ++j) {
      mn = std::fmin(mn, x[j]);
      mx = std::fmax(mx, x[j]);
    }
    const float d = (mx - mn) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(mn);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int q0 = clampi(static_cast<int>((x[j] - mn) * id + 0.5f), 0, 15);
      const int q1 = clampi(static_cast<int>((x[j + QK4_1 / 2] - mn) * id + 0.5f), 0, 15);
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_1; ++b, y += QK4_1) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      y[j] = d * static_cast<float>(x[b].qs[j] & 0xF) + m;
      y[j + QK4_1 / 2] = d * static_cast<float>(x[b].qs[j] >> 4) + m;
    }
  }
}

// ---------------------------------------------------------------- Q5_0 / Q5_1
// Element j's fifth bit (q >> 4) goes to bit j of the little-endian word qh.
void pack_q5_quants(const int q[32], uint8_t* qs, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    h |= uint32_t((q[j] >> 4) & 1) << j;
    h |= uint32_t((q[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

namespace {
// The 5-bit value of element j (0..31) of a block.
inline int q5_at(const uint8_t* qs, const uint8_t* qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return lo | (((qh[j / 8] >> (j % 8)) & 1) << 4);
}
}  // namespace

void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_0; ++b, x += QK5_0) {
    float amax = 0.0f, max = 0.0f;  // max: the signed value with the largest magnitude
    for (int j = 0; j < QK5_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    int q[QK5_0];
    for (int j = 0; j < QK5_0; ++j) q[j] = clampi(static_cast<int>(x[j] * id + 16.5f), 0, 31);
    pack_q5_quants(q, y[b].qs, y[b].qh);
  }
}

void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_0; ++b, y += QK5_0) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < QK5_0; ++j) y[j] = d * static_cast<float>(q5_at(x[b].qs, x[b].qh, j) - 16);
  }
}

void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_1; ++b, x += QK5_1) {
    float mn = INFINITY, mx = -INFINITY;
    for (int j = 0; j < QK5_1; ++j) {
      mn = std::fmin(mn, x[j]);
      mx = std::fmax(mx, x[j]);
    }
    const float d = (mx - mn) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(mn);
    int q[QK5_1];
    for (int j = 0; j < QK5_1; ++j) q[j] = clampi(static_cast<int>((x[j] - mn) * id + 0.5f), 0, 31);
    pack_q5_quants(q, y[b].qs, y[b].qh);
  }
}

void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_1; ++b, y += QK5_1) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < QK5_1; ++j) y[j] = d * static_cast<float>(q5_at(x[b].qs, x[b].qh, j)) + m;
  }
}

// ---------------------------------------------------------------- K-quants, round to nearest
// Scales and mins (Q2_K, Q4_K, Q5_K). Per sub-block j: scale_j = (max_j - min(0, min_j)) /
// qmax, mn_j = -min(0, min_j). Super-block: d = max scale_j / code_max, dmin = max mn_j /
// code_max; the codes sc_j, m_j are those rounded, and the quants are recomputed with the
// fp16-rounded d, dmin (so each is the nearest for the scale that is stored).
void rtn_k_scale_min(const float* x, int n_sub, int qmax, int code_max, uint16_t* d_out, uint16_t* dmin_out,
                     uint8_t* sc, uint8_t* m, uint8_t* q) {
  const int len = QK_K / n_sub;
  float scale[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    float lo = 0.0f, hi = -INFINITY;
    for (int l = 0; l < len; ++l) {
      lo = std::fmin(lo, x[len * j + l]);
      hi = std::fmax(hi, x[len * j + l]);
    }
    scale[j] = (hi - lo) / float(qmax);
    mins[j] = 0.0f - lo;  // +0 (not -0) when lo is 0: fmax of signed zeros is unspecified
    max_scale = std::fmax(max_scale, scale[j]);
    max_min = std::fmax(max_min, mins[j]);
  }
  const float inv_d = max_scale > 0.0f ? float(code_max) / max_scale : 0.0f;
  const float inv_m = max_min > 0.0f ? float(code_max) / max_min : 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    sc[j] = static_cast<uint8_t>(clampi(round_even(scale[j] * inv_d), 0, code_max));
    m[j] = static_cast<uint8_t>(clampi(round_even(mins[j] * inv_m), 0, code_max));
  }
  *d_out = fp32_to_fp16(max_scale / float(code_max));
  *dmin_out = fp32_to_fp16(max_min / float(code_max));
  const float d = fp16_to_fp32(*d_out);
  const float dmin = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < n_sub; ++j) {
    const float step = d * static_cast<float>(sc[j]);
    const float off = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < len; ++l) {
      const int v = step > 0.0f ? round_even((x[len * j + l] + off) / step) : 0;
      q[len * j + l] = static_cast<uint8_t>(clampi(v, 0, qmax));
    }
  }
}

// Signed scales (Q3_K, Q6_K). Per group g: scale_g = (signed value of largest magnitude) /
// -qneg, so that it maps to q = -qneg exactly; d = max |scale_g| / code_max; sc_g =
// round(scale_g / d); q = clamp(round(x / (d * sc_g)), -qneg, qneg - 1) with the
// fp16-rounded d.
void rtn_k_signed_scale(const float* x, int n_sub, int qneg, int code_max, uint16_t* d_out, int8_t* sc, int8_t* q) {
  const int len = QK_K / n_sub;
  float scale[16], max_abs_scale = 0.0f;
  for (int g = 0; g < n_sub; ++g) {
    float amax = 0.0f, max = 0.0f;
    for (int l = 0; l < len; ++l) {
      if (std::fabs(x[len * g + l]) > amax) {
        amax = std::fabs(x[len * g + l]);
        max = x[len * g + l];
      }
    }
    scale[g] = max / -float(qneg);
    max_abs_scale = std::fmax(max_abs_scale, amax / float(qneg));
  }
  const float inv_d = max_abs_scale > 0.0f ? float(code_max) / max_abs_scale : 0.0f;
  *d_out = fp32_to_fp16(max_abs_scale / float(code_max));
  const float d = fp16_to_fp32(*d_out);
  for (int g = 0; g < n_sub; ++g) {
    sc[g] = static_cast<int8_t>(clampi(round_even(scale[g] * inv_d), -code_max, code_max));
    const float step = d * static_cast<float>(sc[g]);
    for (int l = 0; l < len; ++l) {
      const int v = step != 0.0f ? round_even(x[len * g + l] / step) : 0;
      q[len * g + l] = static_cast<int8_t>(clampi(v, -qneg, qneg - 1));
    }
  }
}

// ---------------------------------------------------------------- Q4_K
void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    uint8_t sc[8], m[8], q[QK_K];
    rtn_k_scale_min(x, 8, 15, 63, &y[b].d, &y[b].dmin, sc, m, q);
    pack_scale_min_k4(sc, m, y[b].scales);
    pack_q4_K_quants(q, y[b].qs);
  }
}

void pack_q4_K_quants(const uint8_t q[256], uint8_t* qs) {
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * p + l] = static_cast<uint8_t>(q[64 * p + l] | (q[64 * p + 32 + l] << 4));
    }
  }
}

void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int p = 0; p < 4; ++p, q += 32) {
      uint8_t sc, m;
      get_scale_min_k4(2 * p, x[b].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      get_scale_min_k4(2 * p + 1, x[b].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// ---------------------------------------------------------------- Q6_K
void quantize_row_q6_K(const float* x, block_q6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    int8_t q[QK_K];
    rtn_k_signed_scale(x, 16, 32, 127, &y[b].d, y[b].scales, q);
    uint8_t qq[QK_K];  // biased by +32: 0..63
    for (int i = 0; i < QK_K; ++i) qq[i] = static_cast<uint8_t>(q[i] + 32);
    pack_q6_K_quants(qq, y[b].ql, y[b].qh);
  }
}

void pack_q6_K_quants(const uint8_t q[256], uint8_t* ql_out, uint8_t* qh_out) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* qq = q + 128 * h;
    uint8_t* ql = ql_out + 64 * h;
    uint8_t* qh = qh_out + 32 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) |
                                   ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
    }
  }
}

void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const uint8_t* ql = x[b].ql;
    const uint8_t* qh = x[b].qh;
    const int8_t* sc = x[b].scales;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, y += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = (d * static_cast<float>(sc[is + 0])) * static_cast<float>(q1);
        y[l + 32] = (d * static_cast<float>(sc[is + 2])) * static_cast<float>(q2);
        y[l + 64] = (d * static_cast<float>(sc[is + 4])) * static_cast<float>(q3);
        y[l + 96] = (d * static_cast<float>(sc[is + 6])) * static_cast<float>(q4);
      }
    }
  }
}

// ---------------------------------------------------------------- F16 / BF16
void quantize_row_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void dequantize_row_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}
void quantize_row_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

// ---------------------------------------------------------------- activations
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_1; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      const int q = clampi(round_even(x[j] * id), -127, 127);
      y[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

void dequantize_row_q8_1(const block_q8_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_1; ++b) {
    for (int j = 0; j < QK8_1; ++j) y[b * QK8_1 + j] = x[b].d * static_cast<float>(x[b].qs[j]);
  }
}

void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      y[b].qs[j] = static_cast<int8_t>(clampi(round_even(x[j] * id), -127, 127));
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(s);
    }
    y[b].d = d;
  }
}

void dequantize_row_q8_K(const block_q8_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    for (int j = 0; j < QK_K; ++j) y[b * QK_K + j] = x[b].d * static_cast<float>(x[b].qs[j]);
  }
}

// ---------------------------------------------------------------- static activation scales
void quantize_row_q8_0_static(const float* x, block_q8_0* y, int64_t n, float d) {
  const uint16_t dh = fp32_to_fp16(d);
  const float id = 1.0f / fp16_to_fp32(dh);
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    y[b].d = dh;
    for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = static_q(x[j], id);
  }
}

void quantize_row_q8_1_static(const float* x, block_q8_1* y, int64_t n, float d) {
  const float id = 1.0f / d;
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      y[b].qs[j] = static_q(x[j], id);
      sum += y[b].qs[j];
    }
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

void quantize_row_q8_K_static(const float* x, block_q8_K* y, int64_t n, float d) {
  const float id = 1.0f / d;
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    for (int j = 0; j < QK_K; ++j) y[b].qs[j] = static_q(x[j], id);
    for (int g = 0; g < QK_K / 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(s);
    }
    y[b].d = d;
  }
}

}  // namespace pllm::ref
