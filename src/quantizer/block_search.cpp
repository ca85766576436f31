// Searching quantisers of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) and
// the searches they share with the 256-element ones (block_search_k.cpp). See block_search.h.
#include "quantizer/block_search.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include "quant/reference.h"
#include "quantizer/search_core.h"

namespace pllm {

using namespace search;

double weighted_sse(const float* x, const float* y, const float* w, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = double(x[i]) - double(y[i]);
    s += (w ? double(w[i]) : 1.0) * e * e;
  }
  return s;
}

namespace search {

const float* effective_weights(const float* w, int n) {
  if (!w) return nullptr;
  for (int i = 0; i < n; ++i)
    if (w[i] > 0.0f) return w;
  return nullptr;
}

template <class L>
float best_levels(const float* x, const float* w, int n, const L& lv, float rtn_d, bool round16, int* q) {
  float amax = 0.0f, m = 0.0f;  // m: the signed value of largest magnitude
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      m = x[i];
    }
  }
  float best_d = rtn_d;
  double best = level_error(x, w, n, rtn_d, lv, nullptr);
  auto consider = [&](float d) {
    if (round16) d = round_fp16(d);
    if (!std::isfinite(d)) return;
    const double e = level_error(x, w, n, d, lv, nullptr);
    if (e < best) best = e, best_d = d;
  };
  if (amax > 0.0f) {
    const int lo = lv.value(lv.first()), hi = lv.value(lv.last());
    int tq[kMaxGroup];
    for (float r : kClipRatios) {
      for (int target : {lo, hi}) {
        if (target == 0 || (target == hi && hi == -lo)) continue;  // symmetric: one side suffices
        const float d0 = m / float(target) * r;
        consider(d0);
        level_error(x, w, n, d0, lv, tq);
        for (int i = 0; i < n; ++i) tq[i] = lv.value(tq[i]);
        consider(fit_scale(x, w, tq, n, d0));
      }
    }
  }
  level_error(x, w, n, best_d, lv, q);
  return best_d;
}
template float best_levels(const float*, const float*, int, const IntLevels&, float, bool, int*);
template float best_levels(const float*, const float*, int, const Iq4Levels&, float, bool, int*);

void best_asym(const float* x, const float* w, int n, int qmax, bool round16, bool m_nonpos, const float* rtn_dm,
               float& d_out, float& m_out, int* q) {
  float mn = std::numeric_limits<float>::infinity(), mx = -mn;
  for (int i = 0; i < n; ++i) mn = std::fmin(mn, x[i]), mx = std::fmax(mx, x[i]);
  if (m_nonpos) mn = std::fmin(mn, 0.0f);
  double best = std::numeric_limits<double>::infinity();
  float best_d = 0.0f, best_m = mn;
  auto consider = [&](float d, float m) {
    if (round16) d = round_fp16(d), m = round_fp16(m);
    if (m_nonpos && m > 0.0f) m = 0.0f;
    if (!(d >= 0.0f) || !std::isfinite(d) || !std::isfinite(m)) return;
    const double e = asym_error(x, w, n, d, m, qmax, nullptr);
    if (e < best) best = e, best_d = d, best_m = m;
  };
  consider(0.0f, mn);
  if (rtn_dm) consider(rtn_dm[0], rtn_dm[1]);
  if (mx > mn) {
    int tq[kMaxGroup];
    for (float delta : kRangeDeltas) {
      const float d0 = (mx - mn) / (float(qmax) + delta);
      consider(d0, mn);
      asym_error(x, w, n, d0, mn, qmax, tq);
      float d1 = d0, m1 = mn;
      if (fit_scale_offset(x, w, tq, n, m_nonpos, d1, m1)) consider(d1, m1);
    }
  }
  d_out = best_d;
  m_out = best_m;
  asym_error(x, w, n, best_d, best_m, qmax, q);
}

}  // namespace search

void search_q4_0(const float* x, const float* w, block_q4_0* y) {
  w = effective_weights(w, QK4_0);
  block_q4_0 rtn;
  ref::quantize_row_q4_0(x, &rtn, QK4_0);
  int q[QK4_0];
  const float d = best_sym(x, w, QK4_0, -8, 7, fp16_to_fp32(rtn.d), true, q);
  y->d = fp32_to_fp16(d);
  for (int j = 0; j < QK4_0 / 2; ++j) y->qs[j] = uint8_t((q[j] + 8) | ((q[j + 16] + 8) << 4));
}

void search_q5_0(const float* x, const float* w, block_q5_0* y) {
  w = effective_weights(w, QK5_0);
  block_q5_0 rtn;
  ref::quantize_row_q5_0(x, &rtn, QK5_0);
  int q[QK5_0];
  const float d = best_sym(x, w, QK5_0, -16, 15, fp16_to_fp32(rtn.d), true, q);
  y->d = fp32_to_fp16(d);
  for (int& v : q) v += 16;
  ref::pack_q5_quants(q, y->qs, y->qh);
}

void search_q8_0(const float* x, const float* w, block_q8_0* y) {
  w = effective_weights(w, QK8_0);
  block_q8_0 rtn;
  ref::quantize_row_q8_0(x, &rtn, QK8_0);
  int q[QK8_0];
  // [-127, 127]: the int8 kernels never see -128, as with ggml's quantiser.
  const float d = best_sym(x, w, QK8_0, -127, 127, fp16_to_fp32(rtn.d), true, q);
  y->d = fp32_to_fp16(d);
  for (int j = 0; j < QK8_0; ++j) y->qs[j] = int8_t(q[j]);
}

void search_q4_1(const float* x, const float* w, block_q4_1* y) {
  w = effective_weights(w, QK4_1);
  block_q4_1 rtn;
  ref::quantize_row_q4_1(x, &rtn, QK4_1);
  const float rtn_dm[2] = {fp16_to_fp32(rtn.d), fp16_to_fp32(rtn.m)};
  int q[QK4_1];
  float d, m;
  best_asym(x, w, QK4_1, 15, true, false, rtn_dm, d, m, q);
  y->d = fp32_to_fp16(d);
  y->m = fp32_to_fp16(m);
  for (int j = 0; j < QK4_1 / 2; ++j) y->qs[j] = uint8_t(q[j] | (q[j + 16] << 4));
}

void search_q5_1(const float* x, const float* w, block_q5_1* y) {
  w = effective_weights(w, QK5_1);
  block_q5_1 rtn;
  ref::quantize_row_q5_1(x, &rtn, QK5_1);
  const float rtn_dm[2] = {fp16_to_fp32(rtn.d), fp16_to_fp32(rtn.m)};
  int q[QK5_1];
  float d, m;
  best_asym(x, w, QK5_1, 31, true, false, rtn_dm, d, m, q);
  y->d = fp32_to_fp16(d);
  y->m = fp32_to_fp16(m);
  ref::pack_q5_quants(q, y->qs, y->qh);
}

void search_iq4_nl(const float* x, const float* w, block_iq4_nl* y) {
  w = effective_weights(w, QK4_0);
  block_iq4_nl rtn;
  ref::quantize_row_iq4_nl(x, &rtn, QK4_0);
  int q[QK4_0];
  const float d = best_levels(x, w, QK4_0, Iq4Levels{}, fp16_to_fp32(rtn.d), true, q);
  y->d = fp32_to_fp16(d);
  uint8_t qq[QK4_0];
  for (int j = 0; j < QK4_0; ++j) qq[j] = uint8_t(q[j]);
  ref::pack_iq4_quants(qq, y->qs);
}

}  // namespace pllm
