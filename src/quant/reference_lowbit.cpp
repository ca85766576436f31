// Reference dequantisers of the types the engine reads from llama.cpp's files but does not
// write: Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS (see reference.h). Each is ggml's formula with its
// operations in its order (built with -ffp-contract=off like every reference here): the
// sub-block factor first (d * sc, dmin * m), then factor * q (- min).
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

}  // namespace pllm::ref
