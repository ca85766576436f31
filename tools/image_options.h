// --mmproj / --image / --image-int8: images in a prompt (`run`, `logits`), through the C API's
// pllm_vision_* calls.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli_common.h"

namespace cli {

struct ImageOptions {
  std::string mmproj;
  std::vector<std::string> images;
  bool int8 = false;
  void add_to(CLI::App* cmd);
  bool active() const { return !images.empty(); }
};

struct Vision {
  pllm_vision* p = nullptr;
  Vision(const Model& m, const ImageOptions& o);
  // The session batch (--batch, 0 = 64) raised to hold one tile: its rows may have to run together.
  int session_batch(int asked) const;
  ~Vision() { pllm_vision_free(p); }
  Vision(const Vision&) = delete;
  Vision& operator=(const Vision&) = delete;
};

// The prompt's tokens with the images' rows (pllm_vision_tokenize). Without a marker in the
// text, one per image goes first, as llama-mtmd-cli does.
std::vector<pllm_token> tokenize_with_images(const Vision& v, Session& s, std::string text,
                                             const std::vector<std::string>& image_paths);
// The user's text with one image marker per image first, unless it has markers already.
std::string with_image_markers(const std::string& text, size_t n_images);

}  // namespace cli
