#include "image_options.h"

#include <algorithm>

namespace cli {

void ImageOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--mmproj", mmproj, "vision encoder (llama.cpp's mmproj GGUF) for --image");
  cmd->add_option("--image", images,
                  "an image file (PNG, JPEG, BMP) for the prompt; repeatable. Each goes where the prompt says "
                  PLLM_IMAGE_MARKER ", or before the text");
  cmd->add_flag("--image-int8", int8,
                "the vision encoder's products with int8 activations, as llama.cpp's (default: int16 on quantised weights, "
                "exact on F16 / F32)");
}

int Vision::session_batch(int asked) const {
  return std::max(asked > 0 ? asked : 64, int(pllm_vision_tokens_per_tile(p)));
}

Vision::Vision(const Model& m, const ImageOptions& o) {
  if (o.mmproj.empty()) fail("--image needs --mmproj FILE (the model's vision encoder)");
  check(pllm_vision_load(m.p, o.mmproj.c_str(), o.int8 ? 1 : 0, &p), "loading the vision encoder");
}

std::string with_image_markers(const std::string& text, size_t n_images) {
  if (text.find(PLLM_IMAGE_MARKER) != std::string::npos) return text;
  std::string out;
  for (size_t i = 0; i < n_images; ++i) out += PLLM_IMAGE_MARKER;
  return out + text;
}

std::vector<pllm_token> tokenize_with_images(const Vision& v, Session& s, std::string text,
                                             const std::vector<std::string>& image_paths) {
  std::vector<std::string> bytes;
  for (const std::string& p : image_paths) bytes.push_back(read_file(p));
  std::vector<pllm_image> images;
  for (const std::string& b : bytes) images.push_back({reinterpret_cast<const uint8_t*>(b.data()), b.size()});
  // Room for the image rows up front: a second call would preprocess the images again.
  return grow_tokens(
      text.size() + 64 + 4096 * images.size(),
      [&](pllm_token* out, size_t cap, size_t* n) {
        return pllm_vision_tokenize(v.p, s.p, text.data(), text.size(), images.data(), images.size(), out, cap, n);
      },
      "reading the images");
}

}  // namespace cli
