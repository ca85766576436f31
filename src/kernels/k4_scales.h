// The Q4_K block's packed 6-bit scales and mins, unpacked by plain integer code that every ISA
// file shares (decoders, int8 dots, int16 tiles).
//
// ODR: the files including this are compiled with different -m flags (AVX2, AVX-512, NEON), and
// the compiler may vectorise this function differently in each. With external linkage the
// linker would keep one copy for all, perhaps an AVX-512 one called on an AVX2 machine; the
// unnamed namespace gives each file its own copy.
#pragma once
#include <cstdint>

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

}  // namespace
}  // namespace pllm::kern
