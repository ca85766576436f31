#include "kernels/ops_f32.h"

#include <cmath>

namespace pllm {

void rmsnorm_f32(const float* x, const float* w, float* y, int64_t n, float eps) {
  double ss = 0.0;  // double: the sum of squares of a few thousand values stays exact enough
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void rope_angles(int64_t n_rot, const float* inv_freq, double pos, float* cs, float mscale) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double theta = pos * double(inv_freq[i]);
    cs[i] = float(std::cos(theta) * mscale);
    cs[half + i] = float(std::sin(theta) * mscale);
  }
}

void rope_apply(float* x, int64_t n_rot, const float* cs, bool neox) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float c = cs[i], s = cs[half + i];
    const int64_t a = neox ? i : 2 * i;
    const int64_t b = neox ? i + half : 2 * i + 1;
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

void rope_f32(float* x, int64_t n_rot, const float* inv_freq, double pos, bool neox) {
  float cs[kMaxRopeDims];
  rope_angles(n_rot, inv_freq, pos, cs);
  rope_apply(x, n_rot, cs, neox);
}

void add_f32(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace pllm
