// mmproj (clip) files from outside: GGUF parsing, then the vision loader's checks of the clip
// metadata and tensors (load_mmproj); for a file that loads with a small encoder, a tiny image
// through its projector's preprocessing and the whole encoder, so what the loader accepted is
// what the encoder can run. The bytes are a heap copy of exactly their size
// (MappedFile::from_bytes), so a read one byte past the end is an ASan report.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf.h"
#include "vision/encoder.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

using namespace pllm;
using namespace pllm::vision;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::parse(MappedFile::from_bytes({data, size}, "fuzz.mmproj"));
  if (!file.ok()) return 0;
  auto m = load_mmproj(*file);
  if (!m.ok()) return 0;
  const VisionHparams& hp = (*m)->hp;
  // Encoding is legitimate work at any accepted size, but slow for a fuzzer: small ones only.
  const int64_t side = hp.patches_per_side();
  if (hp.image_size > 128 || side * side > 256 || int64_t(hp.n_embd) * hp.n_ff * hp.n_layer > (int64_t(1) << 20))
    return 0;
  ImageU8 img;
  img.width = 37;
  img.height = 23;
  img.rgb.resize(size_t(img.width) * size_t(img.height) * 3);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t(i * 37 + 11);
  auto pre = preprocess_image(img, hp);
  if (!pre.ok() || pre->images.size() > 8) return 0;
  static ThreadPool pool(1);
  (void)encode_images(**m, *pre, pool, EncodeOptions{});
  return 0;
}
