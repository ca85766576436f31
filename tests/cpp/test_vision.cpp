// The vision layer's own checks: hostile image bytes give one clear error (never a crash or a
// huge allocation), the resampler's invariants, the row ops. The comparisons with llama.cpp
// (preprocessing bytes, embeddings) are in tests/py/test_vision.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "vision/encoder.h"
#include "vision/image.h"
#include "vision/preprocess.h"
#include "vision/resize.h"

#include "stb_image_write_static.h"

using namespace pllm;
using namespace pllm::vision;

namespace {

void append(void* ctx, void* data, int size) {
  auto* v = static_cast<std::vector<uint8_t>*>(ctx);
  v->insert(v->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

ImageU8 noise_image(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  ImageU8 img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * h * 3);
  for (auto& b : img.rgb) b = uint8_t(rng() & 0xff);
  return img;
}

std::vector<uint8_t> png_of(const ImageU8& img) {
  std::vector<uint8_t> out;
  stbi_write_png_to_func(append, &out, img.width, img.height, 3, img.rgb.data(), img.width * 3);
  return out;
}

std::vector<uint8_t> jpeg_of(const ImageU8& img) {
  std::vector<uint8_t> out;
  stbi_write_jpg_to_func(append, &out, img.width, img.height, 3, img.rgb.data(), 90);
  return out;
}

// A PNG signature and IHDR declaring w x h, then nothing: what a decompression bomb's header
// or a cut-off download looks like.
std::vector<uint8_t> png_header_only(uint32_t w, uint32_t h) {
  std::vector<uint8_t> v = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (uint32_t x : {w, h})
    for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
  v.insert(v.end(), {8, 2, 0, 0, 0, 0, 0, 0, 0});  // depth 8, RGB, no interlace; CRC not checked
  return v;
}

}  // namespace

TEST(VisionImage, DecodesPngAndJpegOfOddSizes) {
  const ImageU8 img = noise_image(37, 23, 1);
  auto png = decode_image(png_of(img).data(), png_of(img).size());
  ASSERT_TRUE(png.ok()) << png.error().message;
  EXPECT_EQ(png->width, 37);
  EXPECT_EQ(png->height, 23);
  EXPECT_EQ(png->rgb, img.rgb);  // lossless
  const auto jpg_bytes = jpeg_of(img);
  auto jpg = decode_image(jpg_bytes.data(), jpg_bytes.size());
  ASSERT_TRUE(jpg.ok()) << jpg.error().message;
  EXPECT_EQ(jpg->width, 37);
  EXPECT_EQ(jpg->height, 23);
}

TEST(VisionImage, HostileInputsGiveOneClearError) {
  EXPECT_EQ(decode_image(nullptr, 0).error().code, Status::bad_format);
  const std::vector<uint8_t> junk(1000, 0x5a);
  auto r = decode_image(junk.data(), junk.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::bad_format);
  EXPECT_NE(r.error().message.find("PNG, JPEG or BMP"), std::string::npos) << r.error().message;

  // Huge declared size: refused from the header, before any pixel allocation.
  const auto bomb = png_header_only(16000, 16000);
  r = decode_image(bomb.data(), bomb.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::out_of_range) << r.error().message;
  EXPECT_NE(r.error().message.find("16000x16000"), std::string::npos) << r.error().message;
  const auto wider = png_header_only(1u << 30, 4);
  EXPECT_FALSE(decode_image(wider.data(), wider.size()).ok());

  // A chunk claiming more bytes than the file holds (stb would grow its buffer to the claim
  // first): refused by length, before decoding.
  auto liar = png_header_only(4, 4);
  liar.insert(liar.end(), {0x3f, 0xff, 0xff, 0xf0, 'I', 'D', 'A', 'T', 0x78, 0x9c, 0, 0});
  r = decode_image(liar.data(), liar.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::bad_format);
  EXPECT_NE(r.error().message.find("'IDAT'"), std::string::npos) << r.error().message;

  // Truncated files of both formats, cut at many points.
  const ImageU8 img = noise_image(40, 30, 2);
  for (const auto& full : {png_of(img), jpeg_of(img)}) {
    for (size_t cut : {size_t(1), size_t(8), size_t(33), full.size() / 3, full.size() / 2, full.size() - 20}) {
      auto t = decode_image(full.data(), cut);
      // stb may still return the rows it got for a JPEG cut late; it must never crash, and an
      // error must be bad_format.
      if (!t.ok()) {
        EXPECT_EQ(t.error().code, Status::bad_format) << "cut " << cut << ": " << t.error().message;
      }
    }
  }
  auto missing = load_image_file("/nonexistent/dir/x.png");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Status::io_error);
}

TEST(VisionResize, ConstantStaysConstantForEveryFilter) {
  ImageU8 img;
  img.width = 19;
  img.height = 7;
  img.rgb.assign(size_t(19) * 7 * 3, 0);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t(i % 3 == 0 ? 200 : i % 3 == 1 ? 17 : 255);
  for (ResizeFilter f : {ResizeFilter::bilinear, ResizeFilter::bicubic, ResizeFilter::lanczos})
    for (auto [w, h] : {std::pair{64, 64}, std::pair{5, 3}, std::pair{19, 40}, std::pair{1, 1}}) {
      auto r = resize_image(img, w, h, f);
      ASSERT_TRUE(r.ok());
      ASSERT_EQ(r->rgb.size(), size_t(w) * h * 3);
      for (size_t i = 0; i < r->rgb.size(); ++i) ASSERT_EQ(r->rgb[i], img.rgb[i % 3]) << "filter " << int(f);
    }
}

TEST(VisionResize, SameSizeCopiesAndBadTargetsFail) {
  const ImageU8 img = noise_image(13, 9, 3);
  auto same = resize_image(img, 13, 9, ResizeFilter::lanczos);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->rgb, img.rgb);
  EXPECT_EQ(resize_image(img, 0, 9, ResizeFilter::bilinear).error().code, Status::out_of_range);
  EXPECT_EQ(resize_image(img, 9, 70000, ResizeFilter::bilinear).error().code, Status::out_of_range);
}

TEST(VisionResize, LetterboxCentresWithBlackBars) {
  ImageU8 img;
  img.width = 40;
  img.height = 10;
  img.rgb.assign(size_t(40) * 10 * 3, 255);
  auto r = resize_letterbox(img, 32, 32, ResizeFilter::bilinear);
  ASSERT_TRUE(r.ok());
  // 40x10 fits as 32x8, centred: rows 12..19 white, the rest black.
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) EXPECT_EQ(r->at(x, y, 1), (y >= 12 && y < 20) ? 255 : 0) << x << "," << y;
}

TEST(VisionOps, LayerNormAndGelu) {
  std::vector<float> x = {1.0f, 2.0f, 4.0f, -3.0f, 0.5f}, y(5);
  layernorm_f32(x.data(), nullptr, nullptr, y.data(), 5, 1e-6f);
  double mean = 0, var = 0;
  for (float v : y) mean += v;
  mean /= 5;
  for (float v : y) var += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.0, 1e-6);
  EXPECT_NEAR(var / 5, 1.0, 1e-5);
  std::vector<float> g = {-12.0f, -1.0f, 0.0f, 0.7f, 3.0f};
  const std::vector<float> g0 = g;
  gelu_f32(g.data(), int64_t(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double v = g0[i];
    const double want = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(g[i], want, 1e-6 * (1.0 + std::fabs(want)));
  }
}

TEST(VisionPreprocess, NormalisesAsFloatSteps) {
  VisionHparams hp;
  hp.mean = {0.5f, 0.25f, 0.0f};
  hp.std = {0.5f, 0.25f, 1.0f};
  ImageU8 img;
  img.width = 1;
  img.height = 1;
  img.rgb = {255, 0, 51};
  const ImageF32 f = normalize_image(img, hp);
  EXPECT_EQ(f.px[0], (255.0f / 255.0f - 0.5f) / 0.5f);
  EXPECT_EQ(f.px[1], (0.0f - 0.25f) / 0.25f);
  EXPECT_EQ(f.px[2], 51.0f / 255.0f);
}

#include "vision/layout.h"

TEST(VisionLayout, Idefics3TilesRowByRowThenOverview) {
  VisionHparams hp;
  hp.projector = Projector::idefics3;
  Preprocessed pre;
  pre.grid_x = 2;
  pre.grid_y = 2;
  pre.has_overview = true;
  pre.images.resize(5);
  const auto l = image_layout(hp, pre);
  const std::vector<std::pair<std::string, int>> want = {
      {"<fake_token_around_image><row_1_col_1>", -1}, {"", 0},
      {"<fake_token_around_image><row_1_col_2>", -1}, {"", 1},
      {"\n<fake_token_around_image><row_2_col_1>", -1}, {"", 2},
      {"<fake_token_around_image><row_2_col_2>", -1}, {"", 3},
      {"\n\n<fake_token_around_image><global-img>", -1}, {"", 4},
      {"<fake_token_around_image>", -1}};
  ASSERT_EQ(l.size(), want.size());
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_EQ(l[i].text, want[i].first) << i;
    EXPECT_EQ(l[i].image, want[i].second) << i;
  }
}

TEST(VisionLayout, Gemma3OneImageBetweenItsMarkers) {
  VisionHparams hp;
  hp.projector = Projector::gemma3;
  Preprocessed pre;
  pre.images.resize(1);
  const auto l = image_layout(hp, pre);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0].text, "<start_of_image>");
  EXPECT_EQ(l[1].image, 0);
  EXPECT_EQ(l[2].text, "<end_of_image>");
}
