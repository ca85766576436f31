#include "vision/preprocess.h"

#include <string>

#include "vision/resize.h"

namespace pllm::vision {

ImageF32 normalize_image(const ImageU8& img, const VisionHparams& hp) {
  ImageF32 out;
  out.width = img.width;
  out.height = img.height;
  out.px.resize(img.rgb.size());
  for (size_t i = 0; i < img.rgb.size(); ++i) {
    const size_t c = i % 3;
    // Two float steps, not one fused expression: llama.cpp first stores v / 255 as float.
    const float v = float(img.rgb[i]) / 255.0f;
    out.px[i] = (v - hp.mean[c]) / hp.std[c];
  }
  return out;
}

namespace {

Result<Preprocessed> preprocess_idefics3(const ImageU8& img, const VisionHparams& hp) {
  const int tile = hp.image_size;
  const int L = hp.longest_edge;
  const double aspect = double(img.width) / double(img.height);
  int rw = 0, rh = 0;
  if (img.width >= img.height) {
    rw = L;
    rh = int(L / aspect);
    rh += rh % 2;
  } else {
    rh = L;
    rw = int(L * aspect);
    rw += rw % 2;
  }
  if (rw <= 0 || rh <= 0)
    return make_error(Status::out_of_range, "image: " + std::to_string(img.width) + "x" + std::to_string(img.height) +
                                                " is too narrow to resize for this encoder");
  const int gx = (rw + tile - 1) / tile, gy = (rh + tile - 1) / tile;
  PLLM_ASSIGN(ImageU8 resized, resize_image(img, rw, rh, hp.filter));
  PLLM_ASSIGN(ImageU8 refined, resize_image(resized, gx * tile, gy * tile, hp.filter));
  PLLM_ASSIGN(ImageU8 overview, resize_image(refined, tile, tile, hp.filter));
  Preprocessed out;
  out.grid_x = gx;
  out.grid_y = gy;
  out.has_overview = true;
  out.images.reserve(size_t(gx) * size_t(gy) + 1);
  for (int y = 0; y < gy; ++y)
    for (int x = 0; x < gx; ++x) out.images.push_back(normalize_image(crop_image(refined, x * tile, y * tile, tile, tile), hp));
  out.images.push_back(normalize_image(overview, hp));
  return out;
}

}  // namespace

Result<Preprocessed> preprocess_image(const ImageU8& img, const VisionHparams& hp) {
  if (img.width <= 0 || img.height <= 0 || img.rgb.size() != size_t(img.width) * size_t(img.height) * 3)
    return make_error(Status::invalid_argument, "image: empty or inconsistent pixel buffer");
  if (hp.projector == Projector::idefics3) return preprocess_idefics3(img, hp);
  PLLM_ASSIGN(ImageU8 sq, resize_letterbox(img, hp.image_size, hp.image_size, hp.filter));
  Preprocessed out;
  out.images.push_back(normalize_image(sq, hp));
  return out;
}

}  // namespace pllm::vision
