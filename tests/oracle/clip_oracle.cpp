// pllm-clip-oracle: llama.cpp's answer for one image through one mmproj file, written for the
// vision tests to compare against (tests/py/test_vision.py). Built by bench/setup_llamacpp.sh
// against llama.cpp's static mtmd/clip libraries; not part of PocketLLM itself.
//
//   pllm-clip-oracle MMPROJ IMAGE OUT [THREADS] [REPEAT]
//
// It decodes the image with the stb_image inside libmtmd (as mtmd_helper_bitmap_init_from_file
// does: 3 channels), runs the projector's own llama.cpp preprocessor (the class mtmd picks for it)
// and encodes each preprocessed image separately with clip_image_batch_encode. The entries are
// written in the order mtmd places them in the text: for idefics3 the tiles row by row, then the
// overview; for gemma3 the one image. The internal clip/mtmd headers are used on purpose: the
// public mtmd API needs a text model for tokenizing, and hides the preprocessed floats.
//
// OUT (little-endian): "PLLMCLIP" u32 version=1, u32 n_entries, u32 n_embd_out, then per entry:
//   u32 nx, u32 ny, f32[ny][nx][3] preprocessed image (RGB interleaved, normalised),
//   u32 n_tokens, f32[n_tokens][n_embd_out] embeddings.
// Prints "encode_ms T" (the encodes alone) on stdout; with REPEAT > 0 each image is encoded that
// many times more and "encode_warm_ms T" is the median of those (as vision_probe's).
//
//   pllm-clip-oracle --logits MODEL MMPROJ PROMPT OUT THREADS [--embd FILE] IMAGE...
//
// The text model's logits after a prompt with images, through mtmd's public API as an app uses
// it: PROMPT holds one mtmd_default_marker() ("<__media__>") per IMAGE; mtmd_tokenize lays
// the images out with the projector's tokens, mtmd_helper_eval_chunk_single runs each chunk
// (an image's rows in one batch, non-causal where mtmd says so). --embd: the image rows'
// embeddings from FILE (f32, every image row in order) instead of llama.cpp's encoder, through
// mtmd_helper_decode_image_chunk: the text side alone, with the inputs the caller chose.
// OUT (little-endian): "PLLMMTMD" u32 version=1, u32 n_pos, i32[n_pos] the token of each
//   position (-1: an image row), u32 n_vocab, f32[n_vocab] the last position's logits.
// Exit status: 0 ok, 1 usage, 2 load/decode/encode failure (message on stderr).
#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "clip.h"
#include "clip-impl.h"
#include "clip-model.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd-image.h"
#include "mtmd.h"

extern "C" unsigned char* stbi_load_from_memory(const unsigned char* buffer, int len, int* x, int* y,
                                                 int* channels_in_file, int desired_channels);
extern "C" void stbi_image_free(void* retval_from_stbi_load);

namespace {

void put_u32(std::ofstream& f, uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); }
void put_f32s(std::ofstream& f, const float* p, size_t n) {
  f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n * sizeof(float)));
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "pllm-clip-oracle: %s\n", msg.c_str());
  return 2;
}

// --logits: see the header.
int logits_main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s --logits MODEL MMPROJ PROMPT OUT THREADS IMAGE...\n", argv[0]);
    return 1;
  }
  const int n_threads = std::atoi(argv[6]);
  int first_image = 7;
  std::vector<float> given_embd;
  if (argc > 8 && std::string(argv[7]) == "--embd") {
    std::ifstream e(argv[8], std::ios::binary);
    if (!e) return fail(std::string("cannot open ") + argv[8]);
    std::vector<char> raw((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    given_embd.resize(raw.size() / sizeof(float));
    std::memcpy(given_embd.data(), raw.data(), given_embd.size() * sizeof(float));
    first_image = 9;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[2], mp);
  if (model == nullptr) return fail(std::string("cannot load ") + argv[2]);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 0;  // the model's training context
  cp.n_batch = 512;
  cp.n_ubatch = 512;  // an image's rows in one batch: non-causal attention needs them together
  cp.n_threads = n_threads;
  cp.n_threads_batch = n_threads;
  llama_context* lctx = llama_init_from_model(model, cp);
  if (lctx == nullptr) return fail("cannot create a llama context");
  mtmd_context_params tp = mtmd_context_params_default();
  tp.use_gpu = false;
  tp.print_timings = false;
  tp.n_threads = n_threads;
  tp.warmup = false;
  mtmd_context* mctx = mtmd_init_from_file(argv[3], model, tp);
  if (mctx == nullptr) return fail(std::string("cannot load mmproj ") + argv[3]);
  std::vector<mtmd_bitmap*> bitmaps;
  for (int i = first_image; i < argc; ++i) {
    mtmd_helper_bitmap_wrapper w = mtmd_helper_bitmap_init_from_file(mctx, argv[i], false,
                                                                     mtmd_helper_init_opt_default());
    if (w.bitmap == nullptr) return fail(std::string("cannot decode ") + argv[i]);
    bitmaps.push_back(w.bitmap);
  }
  // From here to the logits: what an app waits for once the image file is read (printed as
  // "ttft_ms", for bench/vision_ttft.py).
  const auto t0 = std::chrono::steady_clock::now();
  mtmd_input_text text{argv[4], std::strlen(argv[4]), /*add_special=*/true, /*parse_special=*/true};
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  if (mtmd_tokenize(mctx, chunks, &text, const_cast<const mtmd_bitmap**>(bitmaps.data()), bitmaps.size()) != 0)
    return fail("mtmd_tokenize failed (markers and images disagree, or preprocessing failed)");
  std::vector<int32_t> layout;
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
    if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* t = mtmd_input_chunk_get_tokens_text(c, &n);
      layout.insert(layout.end(), t, t + n);
    } else {
      layout.insert(layout.end(), mtmd_input_chunk_get_n_tokens(c), -1);
    }
  }
  llama_pos n_past = 0;
  const size_t n_embd = size_t(llama_model_n_embd(model));
  size_t used = 0;  // of given_embd
  const size_t n_chunks = mtmd_input_chunks_size(chunks);
  for (size_t i = 0; i < n_chunks; ++i) {
    const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
    const bool last = i + 1 == n_chunks;
    if (given_embd.empty() || mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      if (mtmd_helper_eval_chunk_single(mctx, lctx, c, n_past, 0, int32_t(cp.n_batch), last, &n_past) != 0)
        return fail("mtmd_helper_eval_chunk_single failed");
      continue;
    }
    const size_t rows = mtmd_input_chunk_get_n_tokens(c);
    if ((used + rows) * n_embd > given_embd.size()) return fail("--embd holds fewer rows than the images need");
    if (mtmd_helper_decode_image_chunk(mctx, lctx, c, given_embd.data() + used * n_embd, n_past, 0,
                                       int32_t(cp.n_batch), &n_past, nullptr, nullptr) != 0)
      return fail("mtmd_helper_decode_image_chunk failed");
    used += rows;
  }
  if (!given_embd.empty() && used * n_embd != given_embd.size()) return fail("--embd holds more rows than the images");
  const float* logits = llama_get_logits_ith(lctx, -1);
  std::printf("ttft_ms %.3f\n", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::ofstream f(argv[5], std::ios::binary);
  if (!f) return fail(std::string("cannot write ") + argv[5]);
  f.write("PLLMMTMD", 8);
  put_u32(f, 1);
  put_u32(f, static_cast<uint32_t>(layout.size()));
  f.write(reinterpret_cast<const char*>(layout.data()), static_cast<std::streamsize>(layout.size() * 4));
  put_u32(f, static_cast<uint32_t>(n_vocab));
  put_f32s(f, logits, size_t(n_vocab));
  mtmd_input_chunks_free(chunks);
  for (mtmd_bitmap* b : bitmaps) mtmd_bitmap_free(b);
  mtmd_free(mctx);
  llama_free(lctx);
  llama_model_free(model);
  return f.good() ? 0 : fail("write failed");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--logits") return logits_main(argc, argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MMPROJ IMAGE OUT [THREADS] [REPEAT]\n", argv[0]);
    return 1;
  }
  const int n_threads = argc > 4 ? std::atoi(argv[4]) : 1;
  const int repeat = argc > 5 ? std::max(0, std::atoi(argv[5])) : 0;

  std::ifstream in(argv[2], std::ios::binary);
  if (!in) return fail(std::string("cannot open ") + argv[2]);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int nx = 0, ny = 0, nc = 0;
  unsigned char* rgb = stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &nx, &ny, &nc, 3);
  if (rgb == nullptr) return fail("stb_image could not decode the image");
  clip_image_u8 img;
  img.set_size({nx, ny}, false);
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) {
      const unsigned char* p = rgb + (static_cast<size_t>(y) * nx + x) * 3;
      img.set_pixel(x, y, {p[0], p[1], p[2]});
    }
  stbi_image_free(rgb);

  clip_context_params params{};
  params.use_gpu = false;
  params.device = nullptr;
  // Plain f32 attention: the reference, not the f16 flash-attention path.
  params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  params.image_min_tokens = -1;
  params.image_max_tokens = -1;
  params.warmup = false;
  clip_init_result res = clip_init(argv[1], params);
  clip_ctx* ctx = res.ctx_v;
  if (ctx == nullptr) return fail("clip_init failed (no vision encoder, or the file is malformed)");

  std::unique_ptr<mtmd_image_preprocessor> pre;
  // The two projectors the tests cover, with the preprocessor mtmd.cpp gives each.
  const projector_type pt = clip_get_projector_type(ctx);
  if (pt == PROJECTOR_TYPE_IDEFICS3) {
    pre = std::make_unique<mtmd_image_preprocessor_idefics3>(ctx);
  } else if (pt == PROJECTOR_TYPE_GEMMA3) {
    pre = std::make_unique<mtmd_image_preprocessor_fixed_size>(ctx);
  } else {
    clip_free(ctx);
    return fail("projector type not covered by the oracle");
  }
  mtmd_image_preproc_out out;
  try {
    out = pre->preprocess(img);
  } catch (const std::exception& e) {
    clip_free(ctx);
    return fail(std::string("preprocess: ") + e.what());
  }
  // mtmd's order for these projectors: tiles row by row, then the overview (ov_img_first = false).
  std::vector<const clip_image_f32*> order;
  for (const auto& e : out.entries) order.push_back(&e);
  if (out.has_overview()) order.push_back(&out.overview);

  const int n_embd_out = clip_n_mmproj_embd(ctx);
  std::ofstream f(argv[3], std::ios::binary);
  if (!f) return fail(std::string("cannot write ") + argv[3]);
  f.write("PLLMCLIP", 8);
  put_u32(f, 1);
  put_u32(f, static_cast<uint32_t>(order.size()));
  put_u32(f, static_cast<uint32_t>(n_embd_out));
  double encode_ms = 0.0;
  std::vector<double> warm;
  for (const clip_image_f32* e : order) {
    put_u32(f, static_cast<uint32_t>(e->nx()));
    put_u32(f, static_cast<uint32_t>(e->ny()));
    const std::vector<float>& px = e->get_ro_buf();
    put_f32s(f, px.data(), px.size());
    clip_image_f32_batch batch;
    batch.entries.push_back(*e);
    const int n_tok = clip_n_output_tokens(ctx, e);
    std::vector<float> embd(static_cast<size_t>(n_tok) * n_embd_out);
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = clip_image_batch_encode(ctx, n_threads, &batch, embd);
    encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!ok) {
      clip_free(ctx);
      return fail("clip_image_batch_encode failed");
    }
    for (int r = 0; r < repeat; ++r) {
      const auto t1 = std::chrono::steady_clock::now();
      if (!clip_image_batch_encode(ctx, n_threads, &batch, embd)) {
        clip_free(ctx);
        return fail("clip_image_batch_encode failed");
      }
      warm.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
    }
    put_u32(f, static_cast<uint32_t>(n_tok));
    put_f32s(f, embd.data(), embd.size());
  }
  clip_free(ctx);
  if (!f.good()) return fail("write failed");
  std::printf("encode_ms %.3f\n", encode_ms);  // the encoder alone, for bench/vision_compare.py
  if (!warm.empty()) {
    std::sort(warm.begin(), warm.end());
    std::printf("encode_warm_ms %.3f\n", warm[warm.size() / 2]);
  }
  return 0;
}
