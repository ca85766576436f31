// The K-quant blocks' packed scales (Q4_K and Q5_K's 6-bit scales and mins, Q3_K's 6-bit signed
// scales, IQ4_XS's), unpacked by plain integer code that every ISA file shares (decoders, int8
// dots, int16 tiles). quant/reference_lowbit.cpp is their independent scalar definition.
//
// ODR: the files including this are compiled with different -m flags (AVX2, AVX-512, NEON), and
// the compiler may vectorise this function differently in each. With external linkage the
// linker would keep one copy for all, perhaps an AVX-512 one called on an AVX2 machine; the
// unnamed namespace gives each file its own copy.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace pllm::kern {
namespace {

// The eight 6-bit scales (out[0..7]) and mins (out[8..15]) of a Q4_K block's 12 scale bytes
// (ggml's get_scale_min_k4 for all j at once).
inline __attribute__((always_inline)) void unpack_k4_scales(const uint8_t* s, uint8_t out[16]) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, s, 4);
  __builtin_memcpy(&w1, s + 4, 4);
  __builtin_memcpy(&w2, s + 8, 4);
  const uint32_t v[4] = {w0 & 0x3f3f3f3fu, (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u), w1 & 0x3f3f3f3fu,
                         ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u)};
  __builtin_memcpy(out, v, 16);
}

// The sixteen signed scales (6-bit value - 32) of a Q3_K block's 12 scale bytes: scale i has its
// low 4 bits in byte i % 8 (low nibble for i < 8, else high) and its top 2 bits in byte 8 + i % 4
// at bits 2 (i / 4).
inline __attribute__((always_inline)) void unpack_k3_scales(const uint8_t* s, int8_t out[16]) {
  uint32_t a[3];
  __builtin_memcpy(a, s, 12);
  const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const uint32_t v[4] = {(a[0] & m4) | ((a[2] & m2) << 4), (a[1] & m4) | (((a[2] >> 2) & m2) << 4),
                         ((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4),
                         ((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4)};
  uint8_t u[16];
  __builtin_memcpy(u, v, 16);
  for (int i = 0; i < 16; ++i) out[i] = static_cast<int8_t>(u[i] - 32);
}

// The eight signed sub-block scales (6-bit ls - 32) of an IQ4_XS block.
inline __attribute__((always_inline)) void unpack_iq4xs_scales(const block_iq4_xs& b, int8_t out[8]) {
  for (int j = 0; j < 8; ++j) {
    const int lo = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF, hi = (b.scales_h >> (2 * j)) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

}  // namespace
}  // namespace pllm::kern
