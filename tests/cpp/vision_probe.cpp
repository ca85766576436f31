// vision_probe: the vision layer from the command line, for tests/py/test_vision.py, which
// compares its output with llama.cpp's (pllm-clip-oracle, same file format).
//
//   vision_probe encode MMPROJ IMAGE OUT [THREADS] [ACT] [REPEAT] [panels|file]
//       preprocess + encode; OUT as pllm-clip-oracle writes it (tests/oracle/clip_oracle.cpp).
//       ACT: an activation word (exact, the default here: the reference; int16; int8). The
//       encoder is loaded with the panels ACT reads (repack_for), as the C API loads it, or
//       with every matrix in the file's layout ("file"). REPEAT > 0 encodes each image
//       that many times more and prints encode_warm_ms, the median of those (what an app that
//       keeps the model loaded sees; encode_ms is the first encode of each image).
//   vision_probe jpeg IN OUT QUALITY
//       re-encode IN (any image we decode) as a JPEG with stb_image_write: the tests make
//       their JPEGs this way (no Pillow in the venv), and llama.cpp decodes the same file
// Exit status: 0 ok, 1 usage, 2 an error from the vision layer (its message on stderr).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "vision/encoder.h"
#include "vision/image.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

#include "stb_image_write_static.h"

namespace {

int fail(const pllm::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message.c_str());
  return 2;
}

void put_u32(std::ofstream& f, uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); }
void put_f32s(std::ofstream& f, const float* p, size_t n) {
  f.write(reinterpret_cast<const char*>(p), std::streamsize(n * sizeof(float)));
}

int cmd_encode(int argc, char** argv) {
  if (argc < 5) return 1;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1;
  pllm::vision::EncodeOptions opt;
  opt.act = pllm::ActMode::exact;  // the reference, unless ACT says otherwise
  if (argc > 6) {
    const auto act = pllm::parse_act_mode(argv[6]);
    if (!act) return 1;
    opt.act = *act;
  }
  const int repeat = argc > 7 ? std::max(0, std::atoi(argv[7])) : 0;
  if (argc > 8 && std::strcmp(argv[8], "file") != 0 && std::strcmp(argv[8], "panels") != 0) return 1;
  const bool file_layout = argc > 8 && std::strcmp(argv[8], "file") == 0;
  auto model = pllm::vision::load_mmproj(argv[2], file_layout ? pllm::RepackMode::none : pllm::repack_for(opt.act));
  if (!model.ok()) return fail(model.error());
  auto img = pllm::vision::load_image_file(argv[3]);
  if (!img.ok()) return fail(img.error());
  auto pre = pllm::vision::preprocess_image(*img, (*model)->hp);
  if (!pre.ok()) return fail(pre.error());
  pllm::ThreadPool pool(threads < 1 ? 1 : threads);
  std::ofstream f(argv[4], std::ios::binary);
  if (!f) return fail(pllm::make_error(pllm::Status::io_error, std::string("cannot write ") + argv[4]));
  const int n_out = (*model)->hp.n_out;
  f.write("PLLMCLIP", 8);
  put_u32(f, 1);
  put_u32(f, uint32_t(pre->images.size()));
  put_u32(f, uint32_t(n_out));
  double encode_ms = 0.0;
  std::vector<double> warm;
  for (const auto& im : pre->images) {
    put_u32(f, uint32_t(im.width));
    put_u32(f, uint32_t(im.height));
    put_f32s(f, im.px.data(), im.px.size());
    const auto t0 = std::chrono::steady_clock::now();
    auto e = pllm::vision::encode_image(**model, im, pool, opt);
    encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!e.ok()) return fail(e.error());
    for (int r = 0; r < repeat; ++r) {
      const auto t1 = std::chrono::steady_clock::now();
      auto again = pllm::vision::encode_image(**model, im, pool, opt);
      warm.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
      if (!again.ok()) return fail(again.error());
    }
    put_u32(f, uint32_t(e->size() / size_t(n_out)));
    put_f32s(f, e->data(), e->size());
  }
  if (!f.good()) return fail(pllm::make_error(pllm::Status::io_error, "write failed"));
  // On stdout, for bench/vision_compare.py: the encoder alone (load and preprocessing excluded).
  std::printf("encode_ms %.3f\n", encode_ms);
  std::printf("repacked_tensors %d\n", (*model)->repacked_tensors);
  if (!warm.empty()) {
    std::sort(warm.begin(), warm.end());
    std::printf("encode_warm_ms %.3f\n", warm[warm.size() / 2]);
  }
  return 0;
}

int cmd_jpeg(int argc, char** argv) {
  if (argc < 5) return 1;
  auto img = pllm::vision::load_image_file(argv[2]);
  if (!img.ok()) return fail(img.error());
  if (!stbi_write_jpg(argv[3], img->width, img->height, 3, img->rgb.data(), std::atoi(argv[4])))
    return fail(pllm::make_error(pllm::Status::io_error, std::string("cannot write ") + argv[3]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rc = 1;
  if (argc >= 2 && std::strcmp(argv[1], "encode") == 0) rc = cmd_encode(argc, argv);
  else if (argc >= 2 && std::strcmp(argv[1], "jpeg") == 0) rc = cmd_jpeg(argc, argv);
  if (rc == 1)
    std::fprintf(stderr, "usage: vision_probe encode MMPROJ IMAGE OUT [THREADS] [exact|int16|int8] [REPEAT] [panels|file]\n"
                         "       vision_probe jpeg IN OUT QUALITY\n");
  return rc;
}
