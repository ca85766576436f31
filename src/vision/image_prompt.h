// A prompt with images, as a text model takes it: the text split at the image markers, each
// image decoded, preprocessed and laid out with its projector's tokens (vision/layout.h). The
// tokenization follows llama.cpp's mtmd_tokenize (each text piece tokenized on its own with
// special tokens parsed, BOS before the first piece), so positions and logits are llama.cpp's.
//
// The result is one token list: text tokens, and for each image tile its rows' ids, negative
// and derived from the pixels, the tile, the mmproj file and the encoder's mode (image_row_ids). The tiles go into
// a session's ImageRows (runtime/image_rows.h), which encodes a tile the first time its rows
// run; so the list works with every path that takes tokens (eval, generate, prewarm, the
// prefix cache), and the same photo asked about again is recognised, not encoded again.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/model.h"
#include "runtime/image_rows.h"
#include "vision/encoder.h"
#include "vision/image.h"
#include "vision/mmproj.h"

namespace pllm::vision {

// History ids of a tile's n rows: negative, a function of the image's pixels, the tile, the
// mmproj file and the encoder's activation mode (whose embeddings differ in their last bits:
// rows cached under one mode are not served to another).
std::vector<int32_t> image_row_ids(const ImageU8& img, uint64_t vision_identity, ActMode act, int tile, int n);

// Whether the text model and the projector fit together: the projector's output width is the
// model's embedding width, and the family's image tokens exist in the vocabulary.
Result<void> check_pairing(const Model& text, const VisionModel& vision);

// prompt: text with one kImageMarker (runtime/image_rows.h) per image (a count that differs is an error).
// add_special: BOS first when the tokenizer adds one (not twice when the text begins with it).
// The tiles are registered in `rows`; their encoder runs with `opt`.
// Returns the prompt's tokens, image rows negative.
Result<std::vector<int32_t>> build_image_prompt(const Model& text, std::shared_ptr<const VisionModel> vision,
                                       std::string_view prompt, std::span<const ImageU8> images, ImageRows& rows,
                                       const EncodeOptions& opt = {}, bool add_special = true);

}  // namespace pllm::vision
