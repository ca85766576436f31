#include "vision/resize.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace pllm::vision {

namespace {

constexpr int kFracBits = 22;  // 32 bits - 8 for the pixel - 2 of headroom for the sum

double filter_support(ResizeFilter f) {
  switch (f) {
    case ResizeFilter::bilinear: return 1.0;
    case ResizeFilter::bicubic: return 2.0;
    case ResizeFilter::lanczos: return 3.0;
  }
  return 1.0;
}

double sinc(double v) {
  if (v == 0.0) return 1.0;
  const double a = v * 3.141592653589793238462643383279502884;
  return std::sin(a) / a;
}

double filter_weight(ResizeFilter f, double x) {
  switch (f) {
    case ResizeFilter::lanczos:
      return (x >= -3.0 && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0;
    case ResizeFilter::bilinear:
      x = std::fabs(x);
      return x < 1.0 ? 1.0 - x : 0.0;
    case ResizeFilter::bicubic: {
      // Keys' cubic with a = -0.5 (Pillow's choice; PyTorch and ggml use -0.75).
      constexpr double a = -0.5;
      x = std::fabs(x);
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
  }
  return 0.0;
}

// For each output index along one axis: the first input index, how many inputs, and their
// fixed-point weights (ksize slots per output, unused ones zero).
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> w;
};

Taps make_taps(int in_size, int out_size, ResizeFilter filter) {
  Taps t;
  const double scale = double(in_size) / out_size;
  const double fscale = std::max(scale, 1.0);  // widen only when shrinking (anti-aliasing)
  const double support = filter_support(filter) * fscale;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.w.assign(size_t(out_size) * size_t(t.ksize), 0);
  std::vector<double> k(size_t(t.ksize));
  const double unit = std::ldexp(1.0, kFracBits);
  for (int o = 0; o < out_size; ++o) {
    const double centre = (o + 0.5) * scale;
    // Truncation toward zero, as the reference's int conversions.
    int lo = int(centre - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = int(centre + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double sum = 0.0;
    const double inv = 1.0 / fscale;  // multiplied, not divided: the last bit must match
    for (int i = 0; i < n; ++i) {
      k[size_t(i)] = filter_weight(filter, (i + lo - centre + 0.5) * inv);
      sum += k[size_t(i)];
    }
    for (int i = 0; i < n; ++i) {
      const double v = sum != 0.0 ? k[size_t(i)] / sum : k[size_t(i)];
      // Half away from zero, then truncate: one rounding, as Pillow does it.
      t.w[size_t(o) * size_t(t.ksize) + size_t(i)] = int32_t(v * unit + (v < 0.0 ? -0.5 : 0.5));
    }
    t.first[size_t(o)] = lo;
    t.count[size_t(o)] = n;
  }
  return t;
}

uint8_t clamp8(int32_t v) { return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v); }

// Rows of `rows` pixels, each `in_w` wide, resampled to `out_w` along x.
std::vector<uint8_t> pass_x(const std::vector<uint8_t>& src, int in_w, int rows, int out_w, const Taps& t) {
  std::vector<uint8_t> out(size_t(out_w) * size_t(rows) * 3);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = src.data() + size_t(y) * size_t(in_w) * 3;
    uint8_t* dst = out.data() + size_t(y) * size_t(out_w) * 3;
    for (int o = 0; o < out_w; ++o) {
      const int32_t* k = t.w.data() + size_t(o) * size_t(t.ksize);
      const uint8_t* p = row + size_t(t.first[size_t(o)]) * 3;
      int32_t acc[3] = {1 << (kFracBits - 1), 1 << (kFracBits - 1), 1 << (kFracBits - 1)};
      for (int i = 0; i < t.count[size_t(o)]; ++i)
        for (int c = 0; c < 3; ++c) acc[c] += int32_t(p[i * 3 + c]) * k[i];
      for (int c = 0; c < 3; ++c) dst[o * 3 + c] = clamp8(acc[c] >> kFracBits);
    }
  }
  return out;
}

// Columns resampled to `out_h` along y; rows are `w` pixels wide.
std::vector<uint8_t> pass_y(const std::vector<uint8_t>& src, int w, int out_h, const Taps& t) {
  const size_t row_len = size_t(w) * 3;
  std::vector<uint8_t> out(row_len * size_t(out_h));
  std::vector<int32_t> acc(row_len);
  for (int o = 0; o < out_h; ++o) {
    const int32_t* k = t.w.data() + size_t(o) * size_t(t.ksize);
    std::fill(acc.begin(), acc.end(), 1 << (kFracBits - 1));
    for (int i = 0; i < t.count[size_t(o)]; ++i) {
      const uint8_t* row = src.data() + size_t(t.first[size_t(o)] + i) * row_len;
      for (size_t j = 0; j < row_len; ++j) acc[j] += int32_t(row[j]) * k[i];
    }
    uint8_t* dst = out.data() + size_t(o) * row_len;
    for (size_t j = 0; j < row_len; ++j) dst[j] = clamp8(acc[j] >> kFracBits);
  }
  return out;
}

}  // namespace

Result<ImageU8> resize_image(const ImageU8& src, int w, int h, ResizeFilter filter) {
  if (w <= 0 || h <= 0 || w > 65536 || h > 65536)
    return make_error(Status::out_of_range,
                      "image: resize target " + std::to_string(w) + "x" + std::to_string(h) + " is out of range");
  if (src.width <= 0 || src.height <= 0) return make_error(Status::invalid_argument, "image: empty source");
  ImageU8 out;
  out.width = w;
  out.height = h;
  if (w == src.width && h == src.height) {
    out.rgb = src.rgb;
    return out;
  }
  std::vector<uint8_t> cur = src.rgb;
  if (w != src.width) cur = pass_x(cur, src.width, src.height, w, make_taps(src.width, w, filter));
  if (h != src.height) cur = pass_y(cur, w, h, make_taps(src.height, h, filter));
  out.rgb = std::move(cur);
  return out;
}

Result<ImageU8> resize_letterbox(const ImageU8& src, int w, int h, ResizeFilter filter) {
  if (w == src.width && h == src.height) return resize_image(src, w, h, filter);
  // In float, as the reference computes it: the rounding of the fitted size depends on it.
  const float sx = float(w) / float(src.width);
  const float sy = float(h) / float(src.height);
  const float s = std::min(sx, sy);
  const int nw = std::min(int(std::ceil(float(src.width) * s)), w);
  const int nh = std::min(int(std::ceil(float(src.height) * s)), h);
  PLLM_ASSIGN(ImageU8 fitted, resize_image(src, nw, nh, filter));
  ImageU8 out;
  out.width = w;
  out.height = h;
  out.rgb.assign(size_t(w) * size_t(h) * 3, 0);
  const int ox = (w - nw) / 2, oy = (h - nh) / 2;
  for (int y = 0; y < nh; ++y)
    std::copy_n(fitted.rgb.data() + size_t(y) * size_t(nw) * 3, size_t(nw) * 3,
                out.rgb.data() + (size_t(y + oy) * size_t(w) + size_t(ox)) * 3);
  return out;
}

ImageU8 crop_image(const ImageU8& src, int x, int y, int w, int h) {
  ImageU8 out;
  out.width = w;
  out.height = h;
  out.rgb.resize(size_t(w) * size_t(h) * 3);
  for (int r = 0; r < h; ++r)
    std::copy_n(src.rgb.data() + (size_t(y + r) * size_t(src.width) + size_t(x)) * 3, size_t(w) * 3,
                out.rgb.data() + size_t(r) * size_t(w) * 3);
  return out;
}

}  // namespace pllm::vision
