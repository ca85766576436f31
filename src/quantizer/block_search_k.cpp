// Searching quantisers of the 256-element super-block formats; see block_search.h. Two
// families share one search each:
//  - scales and mins (Q2_K, Q4_K, Q5_K): x = (D sc_j) q - (Dm mi_j), q in [0, qmax];
//  - signed scales (Q3_K, Q6_K, IQ4_XS): x = (D sc_g) value(q), levels IntLevels or Iq4Levels.
// Per sub-block the scale (and min) come from the same search as the 32-element formats,
// unrounded; the sub-block values are then quantised to the codes of a fp16 super-block
// scale, trying a few super-block scales; then, twice, each code is moved by one where that
// lowers its sub-block's error and the super-block scale(s) are refitted by least squares for
// the chosen codes and quants. rtn's parameters are one of the candidates, and a candidate is
// only taken when it lowers the block's error.
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

// ---- scales and mins ----------------------------------------------------------------

struct AsymFormat {
  int n_sub;     // sub-blocks per 256
  int qmax;      // quants 0..qmax
  int code_max;  // sub-block scale and min codes 0..code_max
  int len() const { return QK_K / n_sub; }
};

struct AsymParams {
  float D = 0, Dm = 0;
  uint8_t sc[16] = {}, mi[16] = {};
};

double asym_k_error(const float* x, const float* w, const AsymFormat& f, const AsymParams& p, int* q) {
  const int L = f.len();
  double e = 0;
  for (int j = 0; j < f.n_sub; ++j) {
    const float step = p.D * float(p.sc[j]), off = p.Dm * float(p.mi[j]);
    e += asym_error(x + L * j, w ? w + L * j : nullptr, L, step, -off, f.qmax, q ? q + L * j : nullptr);
  }
  return e;
}

uint8_t code_of(float v, float D, int code_max) {
  return uint8_t(clamp_int(D > 0.0f ? nearest_int(v / D) : 0, 0, code_max));
}

// The chosen parameters and, in q, the nearest quants at them.
AsymParams search_asym_k(const float* x, const float* w, const AsymFormat& f, const AsymParams& rtn, int* q) {
  const int L = f.len();
  float dj[16], mj[16];  // per sub-block step and min (the offset is -min)
  float max_d = 0, max_m = 0;
  for (int j = 0; j < f.n_sub; ++j) {
    float d, m;
    best_asym(x + L * j, w ? w + L * j : nullptr, L, f.qmax, false, true, nullptr, d, m, q + L * j);
    dj[j] = std::max(d, 0.0f);
    mj[j] = std::max(-m, 0.0f);
    max_d = std::max(max_d, dj[j]);
    max_m = std::max(max_m, mj[j]);
  }

  AsymParams best = rtn;
  double best_err = asym_k_error(x, w, f, rtn, nullptr);
  auto consider = [&](const AsymParams& p) {
    const double e = asym_k_error(x, w, f, p, nullptr);
    if (e < best_err) best_err = e, best = p;
  };
  for (float a : kSuperMults) {
    for (float b : kSuperMults) {
      AsymParams p;
      p.D = round_fp16(max_d / float(f.code_max) * a);
      p.Dm = round_fp16(max_m / float(f.code_max) * b);
      for (int j = 0; j < f.n_sub; ++j)
        p.sc[j] = code_of(dj[j], p.D, f.code_max), p.mi[j] = code_of(mj[j], p.Dm, f.code_max);
      consider(p);
    }
  }
  // Alternately: each sub-block's codes moved by one where that lowers its error at the
  // current super-block scales (rounding the sub-block values to codes one by one is not the
  // best joint choice), then D and Dm refitted for the chosen codes and quants: x ≈ D t - Dm s,
  // t = sc q, s = mi.
  for (int it = 0; it < 2; ++it) {
    AsymParams r = best;
    for (int j = 0; j < f.n_sub; ++j) {
      const float* xj = x + L * j;
      const float* wj = w ? w + L * j : nullptr;
      double ej = asym_error(xj, wj, L, r.D * float(r.sc[j]), -(r.Dm * float(r.mi[j])), f.qmax, nullptr);
      const int sc0 = r.sc[j], mi0 = r.mi[j];
      for (int a = std::max(0, sc0 - 1); a <= std::min(f.code_max, sc0 + 1); ++a) {
        for (int b = std::max(0, mi0 - 1); b <= std::min(f.code_max, mi0 + 1); ++b) {
          const double e = asym_error(xj, wj, L, r.D * float(a), -(r.Dm * float(b)), f.qmax, nullptr);
          if (e < ej) ej = e, r.sc[j] = uint8_t(a), r.mi[j] = uint8_t(b);
        }
      }
    }
    consider(r);
    asym_k_error(x, w, f, best, q);
    double A = 0, B = 0, C = 0, X1 = 0, X2 = 0;
    for (int i = 0; i < QK_K; ++i) {
      const double wi = w ? w[i] : 1.0, t = double(best.sc[i / L]) * q[i], u = -double(best.mi[i / L]);
      A += wi * t * t, B += wi * t * u, C += wi * u * u, X1 += wi * t * x[i], X2 += wi * u * x[i];
    }
    AsymParams p = best;
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
  asym_k_error(x, w, f, best, q);
  return best;
}

// rtn's parameters of a Q2_K / Q4_K / Q5_K block (the quants are recomputed by the search).
AsymParams rtn_asym(const float* x, const AsymFormat& f) {
  AsymParams p;
  uint16_t d, dmin;
  uint8_t q[QK_K];
  ref::rtn_k_scale_min(x, f.n_sub, f.qmax, f.code_max, &d, &dmin, p.sc, p.mi, q);
  p.D = fp16_to_fp32(d);
  p.Dm = fp16_to_fp32(dmin);
  return p;
}

// ---- signed scales --------------------------------------------------------------------

template <class Levels>
struct SymFormat {
  int n_sub;
  Levels levels;
  int code_min, code_max;  // sub-block scale codes
  int len() const { return QK_K / n_sub; }
};

struct SymParams {
  float D = 0;
  int8_t sc[16] = {};
};

template <class Levels>
double sym_k_error(const float* x, const float* w, const SymFormat<Levels>& f, const SymParams& p, int* q) {
  const int L = f.len();
  double e = 0;
  for (int g = 0; g < f.n_sub; ++g)
    e += level_error(x + L * g, w ? w + L * g : nullptr, L, p.D * float(p.sc[g]), f.levels, q ? q + L * g : nullptr);
  return e;
}

template <class Levels>
SymParams search_sym_k(const float* x, const float* w, const SymFormat<Levels>& f, const SymParams& rtn, int* q) {
  const int L = f.len();
  float s[16], max_s = 0;
  for (int g = 0; g < f.n_sub; ++g) {
    s[g] = best_levels(x + L * g, w ? w + L * g : nullptr, L, f.levels, 0.0f, false, q + L * g);
    max_s = std::max(max_s, std::fabs(s[g]));
  }
  SymParams best = rtn;
  double best_err = sym_k_error(x, w, f, rtn, nullptr);
  auto consider = [&](const SymParams& p) {
    const double e = sym_k_error(x, w, f, p, nullptr);
    if (e < best_err) best_err = e, best = p;
  };
  for (float a : kSuperMults) {
    SymParams p;
    p.D = round_fp16(max_s / float(f.code_max) * a);
    for (int g = 0; g < f.n_sub; ++g)
      p.sc[g] = int8_t(clamp_int(p.D > 0 ? nearest_int(s[g] / p.D) : 0, f.code_min, f.code_max));
    consider(p);
  }
  // Alternately: each group's code moved by one where that lowers its error at the current
  // D, then D refitted for the chosen codes and quants: x ≈ D t, t = sc value(q).
  for (int it = 0; it < 2; ++it) {
    SymParams r = best;
    for (int g = 0; g < f.n_sub; ++g) {
      const float* xg = x + L * g;
      const float* wg = w ? w + L * g : nullptr;
      double eg = level_error(xg, wg, L, r.D * float(r.sc[g]), f.levels, nullptr);
      const int c0 = r.sc[g];
      for (int c = std::max(f.code_min, c0 - 1); c <= std::min(f.code_max, c0 + 1); ++c) {
        const double e = level_error(xg, wg, L, r.D * float(c), f.levels, nullptr);
        if (e < eg) eg = e, r.sc[g] = int8_t(c);
      }
    }
    consider(r);
    sym_k_error(x, w, f, best, q);
    int t[QK_K];
    for (int i = 0; i < QK_K; ++i) t[i] = best.sc[i / L] * f.levels.value(q[i]);
    SymParams p = best;
    p.D = round_fp16(fit_scale(x, w, t, QK_K, best.D));
    if (!std::isfinite(p.D)) break;
    consider(p);
  }
  sym_k_error(x, w, f, best, q);
  return best;
}

const AsymFormat kQ2K{16, 3, 15}, kQ4K{8, 15, 63}, kQ5K{8, 31, 63};
const SymFormat<IntLevels> kQ3K{16, IntLevels{-4, 3}, -32, 31}, kQ6K{16, IntLevels{-32, 31}, -127, 127};
const SymFormat<Iq4Levels> kIQ4XS{8, Iq4Levels{}, -32, 31};

// The searched super-block of an asymmetric K type (Q2_K, Q4_K, Q5_K), from rtn's parameters,
// with its codes as the bytes the packers take.
AsymParams search_asym_block(const float* x, const float* w0, const AsymFormat& f, uint8_t q[QK_K]) {
  int c[QK_K];
  const AsymParams p = search_asym_k(x, effective_weights(w0, QK_K), f, rtn_asym(x, f), c);
  for (int i = 0; i < QK_K; ++i) q[i] = uint8_t(c[i]);
  return p;
}

// rtn's parameters of a signed-scale K type of 16-element groups (Q3_K: codes -4..3, Q6_K:
// -32..31; scale codes up to code_max).
SymParams rtn_sym(const float* x, int qneg, int code_max) {
  SymParams rtn;
  uint16_t d;
  int8_t q[QK_K];
  ref::rtn_k_signed_scale(x, 16, qneg, code_max, &d, rtn.sc, q);
  rtn.D = fp16_to_fp32(d);
  return rtn;
}

}  // namespace

void search_q2_K(const float* x, const float* w0, block_q2_K* y) {
  uint8_t q[QK_K];
  const AsymParams p = search_asym_block(x, w0, kQ2K, q);
  y->d = fp32_to_fp16(p.D);
  y->dmin = fp32_to_fp16(p.Dm);
  for (int j = 0; j < 16; ++j) y->scales[j] = uint8_t(p.sc[j] | (p.mi[j] << 4));
  ref::pack_q2_K_quants(q, y->qs);
}

void search_q4_K(const float* x, const float* w0, block_q4_K* y) {
  uint8_t q[QK_K];
  const AsymParams p = search_asym_block(x, w0, kQ4K, q);
  y->d = fp32_to_fp16(p.D);
  y->dmin = fp32_to_fp16(p.Dm);
  ref::pack_scale_min_k4(p.sc, p.mi, y->scales);
  ref::pack_q4_K_quants(q, y->qs);
}

void search_q5_K(const float* x, const float* w0, block_q5_K* y) {
  uint8_t q[QK_K];
  const AsymParams p = search_asym_block(x, w0, kQ5K, q);
  y->d = fp32_to_fp16(p.D);
  y->dmin = fp32_to_fp16(p.Dm);
  ref::pack_scale_min_k4(p.sc, p.mi, y->scales);
  ref::pack_q5_K_quants(q, y->qs, y->qh);
}

void search_q3_K(const float* x, const float* w0, block_q3_K* y) {
  int q[QK_K];
  const SymParams p = search_sym_k(x, effective_weights(w0, QK_K), kQ3K, rtn_sym(x, 4, 31), q);
  y->d = fp32_to_fp16(p.D);
  ref::pack_q3_K_scales(p.sc, y->scales);
  int8_t qq[QK_K];
  for (int i = 0; i < QK_K; ++i) qq[i] = int8_t(q[i]);
  ref::pack_q3_K_quants(qq, y->qs, y->hmask);
}

void search_q6_K(const float* x, const float* w0, block_q6_K* y) {
  int q[QK_K];
  const SymParams p = search_sym_k(x, effective_weights(w0, QK_K), kQ6K, rtn_sym(x, 32, 127), q);
  y->d = fp32_to_fp16(p.D);
  for (int g = 0; g < 16; ++g) y->scales[g] = p.sc[g];
  uint8_t qq[QK_K];
  for (int i = 0; i < QK_K; ++i) qq[i] = uint8_t(q[i] + 32);
  ref::pack_q6_K_quants(qq, y->ql, y->qh);
}

void search_iq4_xs(const float* x, const float* w0, block_iq4_xs* y) {
  const float* w = effective_weights(w0, QK_K);
  SymParams rtn;
  {  // rtn's block, read back (its scale codes are chosen inside quantize_row_iq4_xs)
    block_iq4_xs r;
    ref::quantize_row_iq4_xs(x, &r, QK_K);
    rtn.D = fp16_to_fp32(r.d);
    for (int j = 0; j < 8; ++j) rtn.sc[j] = int8_t(ref::iq4_xs_scale(r, j) - 32);
  }
  int q[QK_K];
  const SymParams p = search_sym_k(x, w, kIQ4XS, rtn, q);
  y->d = fp32_to_fp16(p.D);
  y->scales_h = 0;
  for (int j = 0; j < 8; ++j) {
    ref::set_iq4_xs_scale(*y, j, p.sc[j] + 32);
    uint8_t qq[32];
    for (int l = 0; l < 32; ++l) qq[l] = uint8_t(q[32 * j + l]);
    ref::pack_iq4_quants(qq, y->qs + 16 * j);
  }
}

}  // namespace pllm
