// Reference quantisers and dequantisers of llama.cpp's low-bit types: Q2_K, Q3_K, Q5_K,
// IQ4_NL, IQ4_XS (see reference.h). Each dequantiser is ggml's formula with its operations in
// its order (built with -ffp-contract=off like every reference here): the sub-block factor
// first (d * sc, dmin * m), then factor * q (- min). The quantisers write exactly the bits
// those read.
#include <array>
#include <cmath>

#include "base/fp16.h"
#include "quant/reference.h"

namespace pllm::ref {

void q3_K_scales(const uint8_t* s, int8_t out[16]) {
  // Scale i: low 4 bits from byte i % 8 (low nibble for i < 8, high nibble after), high 2 bits
  // from byte 8 + i % 4, bits 2 (i / 4) and up.
  for (int i = 0; i < 16; ++i) {
    const int lo = (s[i % 8] >> (i < 8 ? 0 : 4)) & 0xF;
    const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

int iq4_xs_scale(const block_iq4_xs& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

void dequantize_row_q2_K(const block_q2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int e = 0; e < QK_K; ++e) {
      const int h = e / 128, j = (e % 128) / 32, l = e % 32;
      const uint8_t sc = x[b].scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
      const int q = (x[b].qs[32 * h + l] >> (2 * j)) & 3;
      y[e] = dl * static_cast<float>(q) - ml;
    }
    y += QK_K;
  }
}

void dequantize_row_q3_K(const block_q3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    int8_t sc[16];
    q3_K_scales(x[b].scales, sc);
    for (int e = 0; e < QK_K; ++e) {
      const int h = e / 128, j = (e % 128) / 32, l = e % 32;
      const int lo = (x[b].qs[32 * h + l] >> (2 * j)) & 3;
      const int q = lo - ((x[b].hmask[l] >> (4 * h + j)) & 1 ? 0 : 4);
      y[e] = (d * static_cast<float>(sc[e / 16])) * static_cast<float>(q);
    }
    y += QK_K;
  }
}

void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d), dmin = fp16_to_fp32(x[b].dmin);
    for (int p = 0; p < 4; ++p) {
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, m;
        get_scale_min_k4(2 * p + half, x[b].scales, &sc, &m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          const int lo = (x[b].qs[32 * p + l] >> (4 * half)) & 0xF;
          const int hi = (x[b].qh[l] >> (2 * p + half)) & 1;
          *y++ = d1 * static_cast<float>(lo | (hi << 4)) - m1;
        }
      }
    }
  }
}

void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b, y += QK4_0) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[x[b].qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[x[b].qs[j] >> 4]);
    }
  }
}

void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < 8; ++j, y += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[b], j) - 32);
      const uint8_t* qs = x[b].qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>(kIq4nlValues[qs[l] & 0xF]);
        y[l + 16] = dl * static_cast<float>(kIq4nlValues[qs[l] >> 4]);
      }
    }
  }
}

// ---------------------------------------------------------------- packing
void pack_q5_K_quants(const uint8_t q[256], uint8_t* qs, uint8_t* qh) {
  uint8_t lo[QK_K];
  for (int i = 0; i < QK_K; ++i) lo[i] = q[i] & 0xF;
  pack_q4_K_quants(lo, qs);
  // Element 64p + 32 half + l: bit 2p + half of qh[l].
  for (int l = 0; l < 32; ++l) {
    uint8_t h = 0;
    for (int k = 0; k < 8; ++k) h |= static_cast<uint8_t>(((q[32 * k + l] >> 4) & 1) << k);
    qh[l] = h;
  }
}

void pack_q2_K_quants(const uint8_t q[256], uint8_t* qs) {
  // Element 128h + 32j + l: bits 2j..2j+1 of qs[32h + l].
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      uint8_t v = 0;
      for (int j = 0; j < 4; ++j) v |= static_cast<uint8_t>((q[128 * h + 32 * j + l] & 3) << (2 * j));
      qs[32 * h + l] = v;
    }
  }
}

void pack_q3_K_quants(const int8_t q[256], uint8_t* qs, uint8_t* hmask) {
  // u = q + 4 (0..7): its low two bits as Q2_K's, its third bit set in hmask means "no - 4".
  uint8_t lo[QK_K];
  for (int l = 0; l < 32; ++l) hmask[l] = 0;
  for (int e = 0; e < QK_K; ++e) {
    const int u = q[e] + 4;
    lo[e] = static_cast<uint8_t>(u & 3);
    const int h = e / 128, j = (e % 128) / 32, l = e % 32;
    hmask[l] |= static_cast<uint8_t>(((u >> 2) & 1) << (4 * h + j));
  }
  pack_q2_K_quants(lo, qs);
}

void pack_q3_K_scales(const int8_t sc[16], uint8_t* s) {
  for (int k = 0; k < 12; ++k) s[k] = 0;
  for (int i = 0; i < 16; ++i) {
    const int v = sc[i] + 32;  // 0..63
    s[i % 8] |= static_cast<uint8_t>((v & 0xF) << (i < 8 ? 0 : 4));
    s[8 + i % 4] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * (i / 4)));
  }
}

void pack_iq4_quants(const uint8_t q[32], uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

void set_iq4_xs_scale(block_iq4_xs& b, int j, int ls) {
  const int sh = 4 * (j % 2);
  b.scales_l[j / 2] = static_cast<uint8_t>((b.scales_l[j / 2] & ~(0xF << sh)) | ((ls & 0xF) << sh));
  b.scales_h = static_cast<uint16_t>((b.scales_h & ~(3u << (2 * j))) | (unsigned((ls >> 4) & 3) << (2 * j)));
}

int nearest_iq4nl(float v) {
  // The table is sorted: the index is the count of midpoints between neighbours below v (a
  // binary search, as the searching quantisers call this for every element of every
  // candidate scale). A tie (v on a midpoint) counts as below: the lower value.
  static constexpr auto kMid = [] {
    std::array<float, 15> m{};
    for (int i = 0; i < 15; ++i) m[i] = 0.5f * float(kIq4nlValues[i] + kIq4nlValues[i + 1]);  // exact
    return m;
  }();
  int pos = 0;
  for (int step = 8; step > 0; step >>= 1)
    if (pos + step <= 15 && kMid[pos + step - 1] < v) pos += step;
  return pos;
}

// ---------------------------------------------------------------- quantisers
void quantize_row_q2_K(const float* x, block_q2_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    uint8_t sc[16], m[16], q[QK_K];
    rtn_k_scale_min(x, 16, 3, 15, &y[b].d, &y[b].dmin, sc, m, q);
    for (int j = 0; j < 16; ++j) y[b].scales[j] = static_cast<uint8_t>(sc[j] | (m[j] << 4));
    pack_q2_K_quants(q, y[b].qs);
  }
}

void quantize_row_q3_K(const float* x, block_q3_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    int8_t sc[16], q[QK_K];
    rtn_k_signed_scale(x, 16, 4, 31, &y[b].d, sc, q);
    pack_q3_K_scales(sc, y[b].scales);
    pack_q3_K_quants(q, y[b].qs, y[b].hmask);
  }
}

void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    uint8_t sc[8], m[8], q[QK_K];
    rtn_k_scale_min(x, 8, 31, 63, &y[b].d, &y[b].dmin, sc, m, q);
    pack_scale_min_k4(sc, m, y[b].scales);
    pack_q5_K_quants(q, y[b].qs, y[b].qh);
  }
}

namespace {
// The signed value of largest magnitude among n (0 for an all-zero group).
float signed_max(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// Each of 32 elements' nearest table index at the step d (index of the value nearest 0
// when d is 0, which decodes to 0 there).
void iq4_indices(const float* x, float d, uint8_t q[32]) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(nearest_iq4nl(x[i] * id));
}
}  // namespace

void quantize_row_iq4_nl(const float* x, block_iq4_nl* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b, x += QK4_0) {
    y[b].d = fp32_to_fp16(signed_max(x, QK4_0) / -127.0f);
    uint8_t q[32];
    iq4_indices(x, fp16_to_fp32(y[b].d), q);
    pack_iq4_quants(q, y[b].qs);
  }
}

void quantize_row_iq4_xs(const float* x, block_iq4_xs* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float s[8], max_abs = 0.0f;
    for (int j = 0; j < 8; ++j) {
      s[j] = signed_max(x + 32 * j, 32) / -127.0f;
      max_abs = std::fmax(max_abs, std::fabs(s[j]));
    }
    const float inv_d = max_abs > 0.0f ? 31.0f / max_abs : 0.0f;
    y[b].d = fp32_to_fp16(max_abs / 31.0f);
    y[b].scales_h = 0;
    const float d = fp16_to_fp32(y[b].d);
    for (int j = 0; j < 8; ++j) {
      int l = static_cast<int>(std::nearbyint(s[j] * inv_d));
      l = l < -32 ? -32 : (l > 31 ? 31 : l);
      set_iq4_xs_scale(y[b], j, l + 32);
      uint8_t q[32];
      iq4_indices(x + 32 * j, d * static_cast<float>(l), q);
      pack_iq4_quants(q, y[b].qs + 16 * j);
    }
  }
}

}  // namespace pllm::ref
