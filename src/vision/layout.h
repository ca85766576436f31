// Where an image's embeddings go in the text: the pieces of text (special tokens written as
// text, to be tokenized with specials parsed) and the encoder outputs between them, in order,
// as llama.cpp's mtmd lays them out for each projector. This is what a chat front end puts
// at the image's place in the prompt.
//   gemma3:   <start_of_image> [image] <end_of_image>
//   idefics3: per tile, row by row: <fake_token_around_image><row_R_col_C> [tile]; "\n" after
//             every row but the last; then "\n\n<fake_token_around_image><global-img>"
//             [overview] "<fake_token_around_image>". (mtmd looks "\n\n" up as one token.)
#pragma once
#include <string>
#include <vector>

#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pllm::vision {

struct LayoutPiece {
  std::string text;  // when image < 0
  int image = -1;    // index into Preprocessed::images: that image's embeddings go here
};

std::vector<LayoutPiece> image_layout(const VisionHparams& hp, const Preprocessed& pre);

}  // namespace pllm::vision
