// The ISA-independent half of the weight decoders that drive fused_dot.h (exact mode, W4A16):
// the row pointer and block walk, the float types' tails, and the K-quants' per-block scalar
// setup. Each ISA's decoder (x86/decode_avx2.h, arm/decode_neon.h) derives from one of these
// and adds unit(u, v), and for the 32-element quantised types its own block(b), which
// broadcasts the block's scales into that ISA's registers.
//
// S is the ISA's vector traits; only S::h2f (IEEE half to float, exact) is used here. ODR: every
// template takes S, so each ISA's instantiations are its own entities (see fused_dot.h).
#pragma once
#include <cstdint>

#include "kernels/k4_scales.h"
#include "quant/blocks.h"

namespace pllm::kern::drivers {

// A float row of T (float, or 16-bit IEEE / bfloat16 halves) in 32-element units.
template <class S, class T>
struct FloatRow {
  static constexpr int kUnits = 1;
  const T* w;
  const T* p = nullptr;
  explicit FloatRow(const void* row) : w(static_cast<const T*>(row)) {}
  inline __attribute__((always_inline)) void block(int64_t b) { p = w + 32 * b; }
};

// tail(n, buf): the last n % 32 weights, widened to f32 (fused_dot.h zero-pads the rest).
template <class S>
struct F32Row : FloatRow<S, float> {
  using FloatRow<S, float>::FloatRow;
  void tail(int64_t n, float* buf) const {
    const int64_t s = n & ~int64_t{31};
    for (int64_t i = s; i < n; ++i) buf[i - s] = this->w[i];
  }
};

template <class S>
struct F16Row : FloatRow<S, uint16_t> {
  using FloatRow<S, uint16_t>::FloatRow;
  void tail(int64_t n, float* buf) const {
    const int64_t s = n & ~int64_t{31};
    for (int64_t i = s; i < n; ++i) buf[i - s] = S::h2f(this->w[i]);
  }
};

template <class S>
struct BF16Row : FloatRow<S, uint16_t> {
  using FloatRow<S, uint16_t>::FloatRow;
  void tail(int64_t n, float* buf) const {
    const int64_t s = n & ~int64_t{31};
    for (int64_t i = s; i < n; ++i) {
      const uint32_t bits = uint32_t(this->w[i]) << 16;
      __builtin_memcpy(buf + i - s, &bits, 4);
    }
  }
};

// A row of quantised blocks B. Quantised rows have no tail (n is a multiple of the block).
template <class S, class B>
struct BlockRow {
  const B* w;
  explicit BlockRow(const void* row) : w(static_cast<const B*>(row)) {}
  void tail(int64_t, float*) const {}
};

// Q4_K and Q5_K (B): unit u (0..7) is x = dsc[u] * q + mn[u], with dsc = d * sc and mn =
// -(dmin * m) both exact products, as the reference's (d * sc) * q - dmin * m; blk is the
// block, q its nibbles.
template <class S, class B>
struct KScaleMinRow : BlockRow<S, B> {
  static constexpr int kUnits = 8;
  const B* blk = nullptr;
  const uint8_t* q = nullptr;
  float dsc[8], mn[8];
  using BlockRow<S, B>::BlockRow;
  inline __attribute__((always_inline)) void block(int64_t b) {
    blk = this->w + b;
    uint8_t sm[16];
    unpack_k4_scales(blk->scales, sm);
    const float d = S::h2f(blk->d), dmin = S::h2f(blk->dmin);
    for (int j = 0; j < 8; ++j) {
      dsc[j] = d * static_cast<float>(sm[j]);
      mn[j] = -(dmin * static_cast<float>(sm[8 + j]));
    }
    q = blk->qs;
  }
};
template <class S>
struct Q4KRow : KScaleMinRow<S, block_q4_K> {
  using KScaleMinRow<S, block_q4_K>::KScaleMinRow;
};
template <class S>
struct Q5KRow : KScaleMinRow<S, block_q5_K> {
  using KScaleMinRow<S, block_q5_K>::KScaleMinRow;
};

// Q2_K: sub-block i (16 elements) is x = dsc[i] * q + mn[i] (the reference's dl * q - ml: dl
// * q is exact, so an FMA rounds as it does).
template <class S>
struct Q2KRow : BlockRow<S, block_q2_K> {
  static constexpr int kUnits = 8;
  const block_q2_K* blk = nullptr;
  float dsc[16], mn[16];
  using BlockRow<S, block_q2_K>::BlockRow;
  inline __attribute__((always_inline)) void block(int64_t b) {
    blk = this->w + b;
    const float d = S::h2f(blk->d), dmin = S::h2f(blk->dmin);
    for (int i = 0; i < 16; ++i) {
      dsc[i] = d * static_cast<float>(blk->scales[i] & 0xF);
      mn[i] = -(dmin * static_cast<float>(blk->scales[i] >> 4));
    }
  }
};

// Q3_K: ds[i] = d * (sc_i - 32) (exact) for sub-block i; x = ds[i] * q.
template <class S>
struct Q3KRow : BlockRow<S, block_q3_K> {
  static constexpr int kUnits = 8;
  const block_q3_K* blk = nullptr;
  float ds[16];
  using BlockRow<S, block_q3_K>::BlockRow;
  inline __attribute__((always_inline)) void block(int64_t b) {
    blk = this->w + b;
    int8_t sc[16];
    unpack_k3_scales(blk->scales, sc);
    const float d = S::h2f(blk->d);
    for (int i = 0; i < 16; ++i) ds[i] = d * static_cast<float>(sc[i]);
  }
};

// IQ4_XS: ds[j] = d * (ls_j - 32) (exact) for sub-block j (32 elements at blk->qs + 16 j);
// x = ds[j] * kIq4nlValues[q].
template <class S>
struct IQ4XSRow : BlockRow<S, block_iq4_xs> {
  static constexpr int kUnits = 8;
  const block_iq4_xs* blk = nullptr;
  float ds[8];
  using BlockRow<S, block_iq4_xs>::BlockRow;
  inline __attribute__((always_inline)) void block(int64_t b) {
    blk = this->w + b;
    int8_t ls[8];
    unpack_iq4xs_scales(*blk, ls);
    const float d = S::h2f(blk->d);
    for (int j = 0; j < 8; ++j) ds[j] = d * static_cast<float>(ls[j]);
  }
};

// Q6_K: the 16 sub-block scales times d (exact), ds[g] for elements 16 g .. 16 g + 15.
template <class S>
struct Q6KRow : BlockRow<S, block_q6_K> {
  static constexpr int kUnits = 8;
  const block_q6_K* blk = nullptr;
  float ds[16];
  using BlockRow<S, block_q6_K>::BlockRow;
  inline __attribute__((always_inline)) void block(int64_t b) {
    blk = this->w + b;
    const float d = S::h2f(blk->d);
    for (int g = 0; g < 16; ++g) ds[g] = d * static_cast<float>(blk->scales[g]);
  }
};

}  // namespace pllm::kern::drivers
