// From a decoded image to the float images the encoder takes, as llama.cpp's mtmd does for
// each projector (mtmd-image.cpp): the same sizes, resampling and normalisation, so the
// results are bit-identical.
//   gemma3:   one image_size square, letterboxed (bilinear, black bars).
//   idefics3: resized (Lanczos) so the longer side is preproc_image_size, the shorter side
//             scaled with it (truncated, then rounded up to even), then stretched to whole
//             tiles of image_size; the tiles row by row, then the whole refined image shrunk to
//             one tile (the overview), which mtmd places last.
#pragma once
#include <vector>

#include "base/result.h"
#include "vision/image.h"
#include "vision/mmproj.h"

namespace pllm::vision {

struct ImageF32 {
  int width = 0;
  int height = 0;
  std::vector<float> px;  // width * height * 3, RGB interleaved, normalised
};

struct Preprocessed {
  std::vector<ImageF32> images;  // in the order their embeddings go into the text
  int grid_x = 0;                // idefics3: tiles per row (0: no tiling)
  int grid_y = 0;
  bool has_overview = false;     // idefics3: the last image is the overview
};

// (v / 255 - mean) / std per channel, in float as llama.cpp computes it.
ImageF32 normalize_image(const ImageU8& img, const VisionHparams& hp);

Result<Preprocessed> preprocess_image(const ImageU8& img, const VisionHparams& hp);

}  // namespace pllm::vision
