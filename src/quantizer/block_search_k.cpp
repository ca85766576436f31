// Searching quantisers of the K-quants (Q4_K, Q6_K); see block_search.h. Per sub-block
// the scale (and min) come from the same search as the 32-element formats, unrounded;
// the sub-block values are then quantised to the 6-bit (Q4_K) or 8-bit (Q6_K) scales of
// a fp16 super-block scale, trying a few super-block scales, and the super-block
// scale(s) are refitted by least squares for the chosen quants. rtn's block is one of
// the candidates.
#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/reference.h"
#include "quantizer/block_search.h"
#include "quantizer/search_core.h"

namespace pllm {

using namespace search;

namespace {

// Super-block scale candidates as multiples of the one that maps the largest sub-block
// value onto the largest code (smaller ones would clip it).
constexpr float kSuperMults[] = {1.0f, 1.01f, 1.02f, 1.04f};

// Q4_K parameters: x = (D sc_j) q - (Dm mi_j), q in [0, 15].
struct Q4KParams {
  float D = 0, Dm = 0;
  uint8_t sc[8] = {}, mi[8] = {};
};

double q4k_error(const float* x, const float* w, const Q4KParams& p, int* q) {
  double e = 0;
  for (int j = 0; j < 8; ++j) {
    const float step = p.D * float(p.sc[j]), off = p.Dm * float(p.mi[j]);
    e += asym_error(x + 32 * j, w ? w + 32 * j : nullptr, 32, step, -off, 15, q ? q + 32 * j : nullptr);
  }
  return e;
}

uint8_t code6(float v, float D) { return uint8_t(clamp_int(D > 0.0f ? nearest_int(v / D) : 0, 0, 63)); }

}  // namespace

void search_q4_K(const float* x, const float* w0, block_q4_K* y) {
  const float* w = effective_weights(w0, QK_K);
  float dj[8], mj[8];  // per sub-block step and min (the offset is -min)
  int q[QK_K];
  float max_d = 0, max_m = 0;
  for (int j = 0; j < 8; ++j) {
    float d, m;
    best_asym(x + 32 * j, w ? w + 32 * j : nullptr, 32, 15, false, true, nullptr, d, m, q + 32 * j);
    dj[j] = std::max(d, 0.0f);
    mj[j] = std::max(-m, 0.0f);
    max_d = std::max(max_d, dj[j]);
    max_m = std::max(max_m, mj[j]);
  }

  Q4KParams best;
  double best_err = std::numeric_limits<double>::infinity();
  auto consider = [&](const Q4KParams& p) {
    const double e = q4k_error(x, w, p, nullptr);
    if (e < best_err) best_err = e, best = p;
  };
  {  // rtn's block, read back
    block_q4_K rtn;
    ref::quantize_row_q4_K(x, &rtn, QK_K);
    Q4KParams p;
    p.D = fp16_to_fp32(rtn.d);
    p.Dm = fp16_to_fp32(rtn.dmin);
    for (int j = 0; j < 8; ++j) ref::get_scale_min_k4(j, rtn.scales, &p.sc[j], &p.mi[j]);
    consider(p);
  }
  for (float a : kSuperMults) {
    for (float b : kSuperMults) {
      Q4KParams p;
      p.D = round_fp16(max_d / 63.0f * a);
      p.Dm = round_fp16(max_m / 63.0f * b);
      for (int j = 0; j < 8; ++j) p.sc[j] = code6(dj[j], p.D), p.mi[j] = code6(mj[j], p.Dm);
      consider(p);
    }
  }
  // Refit D and Dm for the chosen codes and quants: x ≈ D t - Dm s, t = sc q, s = mi.
  for (int it = 0; it < 2; ++it) {
    q4k_error(x, w, best, q);
    double A = 0, B = 0, C = 0, X1 = 0, X2 = 0;
    for (int i = 0; i < QK_K; ++i) {
      const double wi = w ? w[i] : 1.0, t = double(best.sc[i / 32]) * q[i], u = -double(best.mi[i / 32]);
      A += wi * t * t, B += wi * t * u, C += wi * u * u, X1 += wi * t * x[i], X2 += wi * u * x[i];
    }
    Q4KParams p = best;
    const double det = A * C - B * B;
    if (det > 1e-12 * A * C && C > 0) {
      p.D = float((C * X1 - B * X2) / det);
      p.Dm = float((A * X2 - B * X1) / det);
    } else if (A > 0) {
      p.D = float(X1 / A);
    }
    if (p.Dm < 0) p.Dm = 0, p.D = A > 0 ? float(X1 / A) : 0.0f;
    if (!(p.D >= 0.0f) || !std::isfinite(p.D) || !std::isfinite(p.Dm)) break;
    p.D = round_fp16(p.D);
    p.Dm = round_fp16(p.Dm);
    consider(p);
  }
  q4k_error(x, w, best, q);
  y->d = fp32_to_fp16(best.D);
  y->dmin = fp32_to_fp16(best.Dm);
  ref::pack_scale_min_k4(best.sc, best.mi, y->scales);
  uint8_t qq[QK_K];
  for (int i = 0; i < QK_K; ++i) qq[i] = uint8_t(q[i]);
  ref::pack_q4_K_quants(qq, y->qs);
}

namespace {

// Q6_K parameters: x = (D sc_g) q, q in [-32, 31], sc_g in [-127, 127].
struct Q6KParams {
  float D = 0;
  int8_t sc[16] = {};
};

double q6k_error(const float* x, const float* w, const Q6KParams& p, int* q) {
  double e = 0;
  for (int g = 0; g < 16; ++g)
    e += sym_error(x + 16 * g, w ? w + 16 * g : nullptr, 16, p.D * float(p.sc[g]), -32, 31, q ? q + 16 * g : nullptr);
  return e;
}

}  // namespace

void search_q6_K(const float* x, const float* w0, block_q6_K* y) {
  const float* w = effective_weights(w0, QK_K);
  float s[16], max_s = 0;
  int q[QK_K];
  for (int g = 0; g < 16; ++g) {
    s[g] = best_sym(x + 16 * g, w ? w + 16 * g : nullptr, 16, -32, 31, 0.0f, false, q + 16 * g);
    max_s = std::max(max_s, std::fabs(s[g]));
  }
  Q6KParams best;
  double best_err = std::numeric_limits<double>::infinity();
  auto consider = [&](const Q6KParams& p) {
    const double e = q6k_error(x, w, p, nullptr);
    if (e < best_err) best_err = e, best = p;
  };
  {  // rtn's block, read back
    block_q6_K rtn;
    ref::quantize_row_q6_K(x, &rtn, QK_K);
    Q6KParams p;
    p.D = fp16_to_fp32(rtn.d);
    for (int g = 0; g < 16; ++g) p.sc[g] = rtn.scales[g];
    consider(p);
  }
  for (float a : kSuperMults) {
    Q6KParams p;
    p.D = round_fp16(max_s / 127.0f * a);
    for (int g = 0; g < 16; ++g) p.sc[g] = int8_t(clamp_int(p.D > 0 ? nearest_int(s[g] / p.D) : 0, -127, 127));
    consider(p);
  }
  for (int it = 0; it < 2; ++it) {  // refit D: x ≈ D t, t = sc q
    q6k_error(x, w, best, q);
    int t[QK_K];
    for (int i = 0; i < QK_K; ++i) t[i] = best.sc[i / 16] * q[i];
    Q6KParams p = best;
    p.D = round_fp16(fit_scale(x, w, t, QK_K, best.D));
    if (!std::isfinite(p.D)) break;
    consider(p);
  }
  q6k_error(x, w, best, q);
  y->d = fp32_to_fp16(best.D);
  for (int g = 0; g < 16; ++g) y->scales[g] = best.sc[g];
  uint8_t qq[QK_K];
  for (int i = 0; i < QK_K; ++i) qq[i] = uint8_t(q[i] + 32);
  ref::pack_q6_K_quants(qq, y->ql, y->qh);
}

}  // namespace pllm
