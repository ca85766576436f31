// Decode matvec over load-time repacked 16-row panels (TypeKernels::vec_dot_panels,
// layout in quant/panel.h): the scalar twins. They read the panel layout directly and
// compute, per row, the same integer block sums as vec_dot on the file's layout, so they
// check both the layout and the SIMD kernels.
#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kernels/internal.h"
#include "quant/blocks.h"
#include "quant/panel.h"

namespace pllm::kern {

namespace {

constexpr int kR = kPanelRows;

inline float h16(const uint8_t* p, int i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return fp16_to_fp32(h);
}

// Integer dot of row i's 4-bit quants (q, 0..15) in a Q4 panel block with 32 activations.
inline int32_t q4_isum(const uint8_t* qs, int i, const int8_t* a) {
  int32_t s = 0;
  for (int v = 0; v < 4; ++v)
    for (int j = 0; j < 4; ++j) {
      const uint8_t b = qs[v * 64 + 4 * i + j];
      s += int32_t(b & 0x0F) * a[4 * v + j] + int32_t(b >> 4) * a[4 * (v + 4) + j];
    }
  return s;
}

void panels_q4_0(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / QK4_0;
  const auto* a = static_cast<const block_q8_0*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(block_q4_0);
  for (int pn = 0; pn < n_panels; ++pn) {
    float acc[kR] = {};
    for (int64_t b = 0; b < nb; ++b, p += kBB) {
      int32_t asum = 0;
      for (int k = 0; k < QK8_0; ++k) asum += a[b].qs[k];
      const float da = fp16_to_fp32(a[b].d);
      for (int i = 0; i < kR; ++i) acc[i] += h16(p, i) * da * float(q4_isum(p + 32, i, a[b].qs) - 8 * asum);
    }
    for (int i = 0; i < kR; ++i) out[pn * kR + i] = acc[i];
  }
}

void panels_q4_1(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / QK4_1;
  const auto* a = static_cast<const block_q8_1*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(block_q4_1);
  for (int pn = 0; pn < n_panels; ++pn) {
    float acc[kR] = {};
    for (int64_t b = 0; b < nb; ++b, p += kBB)
      for (int i = 0; i < kR; ++i)
        acc[i] += h16(p, i) * a[b].d * float(q4_isum(p + 64, i, a[b].qs)) + h16(p, kR + i) * a[b].s;
    for (int i = 0; i < kR; ++i) out[pn * kR + i] = acc[i];
  }
}

void panels_q8_0(int64_t n, const void* w, int n_panels, const void* xq, float* out) {
  const int64_t nb = n / QK8_0;
  const auto* a = static_cast<const block_q8_0*>(xq);
  const uint8_t* p = static_cast<const uint8_t*>(w);
  constexpr size_t kBB = kR * sizeof(block_q8_0);
  for (int pn = 0; pn < n_panels; ++pn) {
    float acc[kR] = {};
    for (int64_t b = 0; b < nb; ++b, p += kBB) {
      const float da = fp16_to_fp32(a[b].d);
      for (int i = 0; i < kR; ++i) {
        int32_t s = 0;  // stored bytes are q + 128
        for (int g = 0; g < 8; ++g)
          for (int j = 0; j < 4; ++j) s += (int32_t(p[32 + g * 64 + 4 * i + j]) - 128) * a[b].qs[4 * g + j];
        acc[i] += h16(p, i) * da * float(s);
      }
    }
    for (int i = 0; i < kR; ++i) out[pn * kR + i] = acc[i];
  }
}

}  // namespace

void fill_panel_scalar(KernelTable& t) {
  t.types[int(TensorType::Q4_0)].vec_dot_panels = panels_q4_0;
  t.types[int(TensorType::Q4_1)].vec_dot_panels = panels_q4_1;
  t.types[int(TensorType::Q8_0)].vec_dot_panels = panels_q8_0;
}

}  // namespace pllm::kern
