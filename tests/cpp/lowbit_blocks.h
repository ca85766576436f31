// Test rows of the types the engine reads from llama.cpp's files but has no quantiser for (Q2_K,
// Q3_K, Q5_K, IQ4_NL, IQ4_XS), shared by the kernel tests: random bytes (every code, bit mask
// and packed scale pattern) with finite fp16 super-block scales, and an element decoder written
// from the format description (byte offsets, not the structs), so the tests do not check the
// reference dequantisers against themselves. tests/py/test_lowbit_dequant.py checks those
// against gguf-py bit for bit.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>

#include "base/fp16.h"
#include "quant/types.h"

namespace pllm::lowbit_test {

inline bool is_lowbit(TensorType t) {
  return t == TensorType::Q2_K || t == TensorType::Q3_K || t == TensorType::Q5_K || t == TensorType::IQ4_NL ||
         t == TensorType::IQ4_XS;
}

// Byte offsets of a block's fp16 fields (-1: none).
inline void half_offsets(TensorType t, int off[2]) {
  off[0] = off[1] = -1;
  switch (t) {
    case TensorType::Q2_K: off[0] = 80, off[1] = 82; break;  // d, dmin after scales[16], qs[64]
    case TensorType::Q3_K: off[0] = 108; break;              // d after hmask[32], qs[64], scales[12]
    case TensorType::Q5_K: off[0] = 0, off[1] = 2; break;    // d, dmin first
    case TensorType::IQ4_NL:
    case TensorType::IQ4_XS: off[0] = 0; break;
    default: break;
  }
}

// Random blocks over bytes [w, w + bytes); scale16 draws each fp16 field.
template <class Scale16>
void fill_blocks(TensorType t, uint8_t* w, size_t bytes, std::mt19937& rng, Scale16 scale16) {
  for (size_t i = 0; i < bytes; ++i) w[i] = static_cast<uint8_t>(rng());
  const size_t bb = type_traits(uint32_t(t))->block_bytes;
  int off[2];
  half_offsets(t, off);
  for (size_t b = 0; b < bytes; b += bb)
    for (int o : off)
      if (o >= 0) {
        const uint16_t h = scale16(rng);
        std::memcpy(w + b + o, &h, 2);
      }
}

// Element i of a row as scale + offset (each exact in double): the weight is their sum.
inline void decode_element(TensorType t, const uint8_t* p, int64_t i, double& scale, double& offset) {
  static const int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  auto h = [](const uint8_t* at) { uint16_t v; std::memcpy(&v, at, 2); return static_cast<double>(fp16_to_fp32(v)); };
  const int e = int(i % 256), half = e / 128, j = (e % 128) / 32, l = e % 32;
  offset = 0.0;
  switch (t) {
    case TensorType::Q2_K: {  // scales[16] (scale | min << 4), qs[64], d, dmin
      const uint8_t* b = p + 84 * (i / 256);
      const int q = (b[16 + 32 * half + l] >> (2 * j)) & 3;
      scale = h(b + 80) * (b[e / 16] % 16) * q;
      offset = -h(b + 82) * (b[e / 16] / 16);
      return;
    }
    case TensorType::Q3_K: {  // hmask[32], qs[64], scales[12], d
      const uint8_t* b = p + 110 * (i / 256);
      const int s = e / 16;
      const int lo = s < 8 ? b[96 + s] % 16 : b[96 + s - 8] / 16;
      const int hi = (b[104 + s % 4] >> (2 * (s / 4))) & 3;
      const int q = ((b[32 + 32 * half + l] >> (2 * j)) & 3) - (((b[l] >> (4 * half + j)) & 1) ? 0 : 4);
      scale = h(b + 108) * (lo + 16 * hi - 32) * q;
      return;
    }
    case TensorType::Q5_K: {  // d, dmin, scales[12] (Q4_K's packing), qh[32], qs[128]
      const uint8_t* b = p + 176 * (i / 256);
      const uint8_t* s = b + 4;
      const int sub = e / 32;
      int sc, m;
      if (sub < 4) {
        sc = s[sub] % 64;
        m = s[4 + sub] % 64;
      } else {
        sc = (s[8 + sub - 4] % 16) + 16 * (s[sub - 4] / 64);
        m = (s[8 + sub - 4] / 16) + 16 * (s[sub] / 64);
      }
      const uint8_t byte = b[48 + 32 * (e / 64) + l];
      const int q = ((e % 64) < 32 ? byte % 16 : byte / 16) + 16 * ((b[16 + l] >> sub) & 1);
      scale = h(b) * sc * q;
      offset = -h(b + 2) * m;
      return;
    }
    case TensorType::IQ4_NL: {  // d, qs[16]
      const uint8_t* b = p + 18 * (i / 32);
      const int k = int(i % 32);
      scale = h(b) * kLevels[k < 16 ? b[2 + k] % 16 : b[2 + k - 16] / 16];
      return;
    }
    case TensorType::IQ4_XS: {  // d, scales_h (u16), scales_l[4], qs[128] (16 per sub-block)
      const uint8_t* b = p + 136 * (i / 256);
      const int sub = e / 32, k = e % 32;
      const int sh = b[2] | (b[3] << 8);
      const int ls = ((b[4 + sub / 2] >> (4 * (sub % 2))) & 15) | (((sh >> (2 * sub)) & 3) << 4);
      const uint8_t* qs = b + 8 + 16 * sub;
      scale = h(b) * (ls - 32) * kLevels[k < 16 ? qs[k] % 16 : qs[k - 16] / 16];
      return;
    }
    default: scale = 0.0; return;
  }
}

}  // namespace pllm::lowbit_test
