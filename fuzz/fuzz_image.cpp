// Image bytes from outside (a chat app's attachment): decode_image (stb_image behind our size
// checks), then, for what decodes, both projectors' preprocessing (resampling, tiling,
// letterboxing) with small encoder sizes so one input stays fast. The bytes are a heap copy of
// exactly their size, so a read past the end is an ASan report.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vision/image.h"
#include "vision/preprocess.h"

using namespace pllm::vision;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  auto img = decode_image(bytes.data(), bytes.size());
  if (!img.ok()) return 0;
  // Large decodes are legitimate but slow to resample; the decoder was the target for them.
  if (int64_t(img->width) * img->height > 512 * 512) return 0;
  VisionHparams hp;
  hp.image_size = 32;
  hp.patch_size = 8;
  hp.mean = {0.5f, 0.5f, 0.5f};
  hp.std = {0.5f, 0.5f, 0.5f};
  hp.projector = Projector::gemma3;
  hp.filter = ResizeFilter::bilinear;
  (void)preprocess_image(*img, hp);
  hp.projector = Projector::idefics3;
  hp.filter = ResizeFilter::lanczos;
  hp.longest_edge = 64;
  (void)preprocess_image(*img, hp);
  return 0;
}
