// Decoded images for the vision encoder: 8-bit RGB, rows top to bottom, pixels interleaved.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace pllm::vision {

struct ImageU8 {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
  uint8_t at(int x, int y, int c) const { return rgb[(size_t(y) * size_t(width) + size_t(x)) * 3 + size_t(c)]; }
};

// Limits on what decode_image accepts: a phone should refuse a decompression bomb before it
// allocates, and the resampler's fixed-point sums assume sizes far below int's range.
inline constexpr int kMaxImageSide = 16384;
inline constexpr int64_t kMaxImagePixels = int64_t(64) << 20;  // 64 Mpixel (192 MiB as RGB)
inline constexpr size_t kMaxImageFileBytes = size_t(256) << 20;

// PNG, JPEG or BMP bytes to RGB: grey is replicated to three channels and alpha is dropped
// (what llama.cpp's loader gives: stb_image asked for 3 channels). Errors: bad_format for a
// truncated or corrupt file or an unknown format, out_of_range for a too-large image.
Result<ImageU8> decode_image(const uint8_t* data, size_t n);
Result<ImageU8> load_image_file(const std::string& path);

}  // namespace pllm::vision
