// Building blocks of the searching quantisers (block_search.cpp, block_search_k.cpp):
// nearest-value quantisation of a group at given parameters with its weighted squared
// error, and least-squares refits of the parameters for fixed quants. Internal to
// src/quantizer/.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/reference.h"

namespace pllm::search {

// Round half to even, exact for |v| < 2^22 (v is clamped to that range first).
inline int nearest_int(float v) {
  v = v < -4194303.0f ? -4194303.0f : (v > 4194303.0f ? 4194303.0f : v);
  const float f = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

inline float round_fp16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// The values a quant stands for at unit scale. IntLevels: the integers qmin..qmax (the
// linear formats; a quant is its value). Iq4Levels: the 16 non-linear kIq4nlValues (IQ4_NL,
// IQ4_XS; a quant is an index into them). Both integer-valued, ascending, so least-squares
// fits take the values as ints.
struct IntLevels {
  int qmin, qmax;
  int nearest(float v) const { return clamp_int(nearest_int(v), qmin, qmax); }
  int value(int q) const { return q; }
  int first() const { return qmin; }
  int last() const { return qmax; }
};
struct Iq4Levels {
  int nearest(float v) const { return ref::nearest_iq4nl(v); }
  int value(int q) const { return kIq4nlValues[q]; }
  int first() const { return 0; }
  int last() const { return 15; }
};

// x ≈ d * value(q): the nearest level for each element (q may be null) and sum w (x - d
// value(q))² (w null: all 1).
template <class L>
double level_error(const float* x, const float* w, int n, float d, const L& lv, int* q) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int qi = lv.nearest(x[i] * id);
    if (q) q[i] = qi;
    const float e = x[i] - d * float(lv.value(qi));
    err += double(w ? w[i] : 1.0f) * double(e) * double(e);
  }
  return err;
}

// x ≈ d * q, q in [qmin, qmax].
inline double sym_error(const float* x, const float* w, int n, float d, int qmin, int qmax, int* q) {
  return level_error(x, w, n, d, IntLevels{qmin, qmax}, q);
}

// x ≈ d * q + m, q in [0, qmax]: nearest q (q may be null) and the weighted error.
inline double asym_error(const float* x, const float* w, int n, float d, float m, int qmax, int* q) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int qi = clamp_int(nearest_int((x[i] - m) * id), 0, qmax);
    if (q) q[i] = qi;
    const float e = x[i] - (d * float(qi) + m);
    err += double(w ? w[i] : 1.0f) * double(e) * double(e);
  }
  return err;
}

// Least-squares d for x ≈ d * t (fixed t); `fallback` when every t is 0.
inline float fit_scale(const float* x, const float* w, const int* t, int n, float fallback) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    const double wi = w ? w[i] : 1.0;
    num += wi * double(t[i]) * x[i];
    den += wi * double(t[i]) * t[i];
  }
  return den > 0 ? float(num / den) : fallback;
}

// Least-squares (d, m) for x ≈ d * q + m (fixed q); with m_nonpos, m is held <= 0 (the
// K-quants store the offset as -dmin * min with min >= 0). Returns false when the fit
// is degenerate (all q equal), leaving d and m unchanged.
inline bool fit_scale_offset(const float* x, const float* w, const int* q, int n, bool m_nonpos, float& d,
                             float& m) {
  double A = 0, B = 0, C = 0, X1 = 0, X0 = 0;
  for (int i = 0; i < n; ++i) {
    const double wi = w ? w[i] : 1.0, qi = q[i];
    A += wi * qi * qi;
    B += wi * qi;
    C += wi;
    X1 += wi * qi * x[i];
    X0 += wi * x[i];
  }
  const double det = A * C - B * B;
  if (!(det > 1e-12 * A * C) || C <= 0) return false;
  double dd = (C * X1 - B * X0) / det, mm = (A * X0 - B * X1) / det;
  if (m_nonpos && mm > 0) {
    mm = 0;
    dd = X1 / A;
  }
  d = float(dd);
  m = float(mm);
  return true;
}

// ---- the searches (block_search.cpp), shared by the K-quants ----------------------

inline constexpr int kMaxGroup = 32;  // largest group one search handles
// Scale candidates as a fraction of the one that maps the largest magnitude onto the
// end of the range: some clipping usually lowers the error of a 4-bit block.
inline constexpr float kClipRatios[] = {1.05f, 1.0f,   0.975f, 0.95f, 0.925f, 0.9f, 0.875f,
                                        0.85f, 0.825f, 0.8f,   0.775f, 0.75f, 0.7f};
// Asymmetric formats: step = (max - min) / (qmax + delta).
inline constexpr float kRangeDeltas[] = {-1.0f, -0.8f, -0.6f, -0.4f, -0.2f, 0.0f, 0.2f,
                                         0.4f,  0.6f,  0.8f,  1.0f,  1.25f, 1.5f};

// w, or null when w is null or all zero (then the block is quantised unweighted).
const float* effective_weights(const float* w, int n);

// x ≈ d value(q): the best step over the clip-ratio grid, aimed at both ends of the levels
// (one for symmetric integers; each candidate also refitted by least squares), and rtn_d;
// round16: steps are rounded to fp16 before they are scored (what the format stores).
// Writes the nearest quants at the chosen step. Defined for IntLevels and Iq4Levels.
template <class L>
float best_levels(const float* x, const float* w, int n, const L& lv, float rtn_d, bool round16, int* q);

inline float best_sym(const float* x, const float* w, int n, int qmin, int qmax, float rtn_d, bool round16, int* q) {
  return best_levels(x, w, n, IntLevels{qmin, qmax}, rtn_d, round16, q);
}

// x ≈ d q + m, q in [0, qmax], d >= 0 (m <= 0 with m_nonpos): the best (d, m) over the
// range grid, their least-squares refits, (0, min) and rtn_dm (if not null: {d, m}).
void best_asym(const float* x, const float* w, int n, int qmax, bool round16, bool m_nonpos, const float* rtn_dm,
               float& d_out, float& m_out, int* q);

}  // namespace pllm::search
