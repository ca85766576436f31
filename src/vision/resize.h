// Image resampling as llama.cpp's mtmd does it, which follows Pillow's Resample.c: separable
// convolution (horizontal pass, then vertical) with the filter widened by the scale when
// shrinking, weights normalised in double and rounded to 22-bit fixed point, each pass's sums
// rounded and clamped to 8 bits. The preprocessing tests demand the same bytes as llama.cpp,
// so every rounding step here is deliberate.
#pragma once
#include "base/result.h"
#include "vision/image.h"
#include "vision/mmproj.h"

namespace pllm::vision {

// src resized to exactly w x h (no aspect preservation). A size equal to the source copies.
// Errors (out_of_range) for w or h outside [1, 65536], as llama.cpp refuses them.
Result<ImageU8> resize_image(const ImageU8& src, int w, int h, ResizeFilter filter);

// Fit inside w x h keeping the aspect ratio (sides rounded up, as llama.cpp's PAD_CEIL), the
// rest filled with black, the resized image centred (offsets rounded down).
Result<ImageU8> resize_letterbox(const ImageU8& src, int w, int h, ResizeFilter filter);

// The w x h rectangle at (x, y); the caller keeps it inside src.
ImageU8 crop_image(const ImageU8& src, int x, int y, int w, int h);

}  // namespace pllm::vision
