// Driver of KernelTable::delta_rule_step: one position of a Gated DeltaNet head (qwen35),
// written once; each table instantiates it with its f32 vector traits (generic/scalar.cpp with
// one-float "vectors", x86/act_avx2.cpp with avx2::F32x8, arm/act_neon.cpp with neon::F32x4).
//
// Why a canonical order: the two dot products per state row (S_j . k and S_j . q) are sums of n
// products whose order decides their rounding. A plain loop adds them one by one: a chain of
// n dependent adds (4 cycles each), the whole step latency-bound (~50 us per 128 x 128 head on
// a Zen 4, 10-15 ms per Qwen3.5-0.8B token). Here element i goes to partial sum i % 32, each
// partial sum an FMA chain in element order, and the 32 partial sums are added as a fixed tree
// (lanes l and l + w for w = 16, 8, 4, 2, 1); elements past the last multiple of 32 are FMA'd
// one by one into a tail sum added last. Every table computes exactly that, so results are the
// same bit for bit on every ISA and in every activation mode, and the scalar twin is this driver
// with 32 one-lane registers.
//
// The step, per value row j of S (value-major: S[j * n + i] = S[i][j]):
//   s = S_j * decay (rounded product, stored);  sk = sum s_i k_i
//   d = (v_j - sk) * beta
//   s = fma(k, d, s) (stored);                   out_j = (sum s_i q_i) * out_scale
//
// Contract of T (the shared f32 traits, simd_avx2.h's F32x8 and simd_neon.h's F32x4):
//   kLanes     floats per vector (32 % kLanes == 0)
//   V          the vector; zero(), set1(x), load(p), store(p, v), mul(a, b), add(a, b),
//              fma(acc, a, b) = acc + a * b rounded once
//   hsum(v)    the sum of v's lanes as lanes l and l + w added for w = kLanes / 2, ..., 1 (lane 0
//              of the result; F32x8's is; NEON's vaddv is not, act_neon.cpp overrides it); for
//              kLanes = 1, v itself
//
// ODR: templates over the ISA's types only (see fused_dot.h).
#pragma once
#include <cmath>
#include <cstdint>

#define PLLM_DR_AI inline __attribute__((always_inline))

namespace pllm::kern::drivers {

inline constexpr int kDeltaRuleLanes = 32;

// The canonical sum of 32 partial sums held in kDeltaRuleLanes / kLanes registers.
template <class T>
PLLM_DR_AI float delta_rule_sum(typename T::V (&acc)[kDeltaRuleLanes / T::kLanes]) {
  constexpr int kRegs = kDeltaRuleLanes / T::kLanes;
  for (int w = kRegs / 2; w >= 1; w /= 2)
    for (int r = 0; r < w; ++r) acc[r] = T::add(acc[r], acc[r + w]);
  return T::hsum(acc[0]);
}

template <class T>
void delta_rule_step(float* S, const float* q, const float* k, const float* v, float decay, float beta,
                     float out_scale, int64_t n, float* out) {
  using V = typename T::V;
  constexpr int kRegs = kDeltaRuleLanes / T::kLanes;
  const int64_t n32 = n / kDeltaRuleLanes * kDeltaRuleLanes;
  const V vdecay = T::set1(decay);
  for (int64_t j = 0; j < n; ++j) {
    float* row = S + j * n;
    V acc[kRegs];
    for (int r = 0; r < kRegs; ++r) acc[r] = T::zero();
    for (int64_t i = 0; i < n32; i += kDeltaRuleLanes)
      for (int r = 0; r < kRegs; ++r) {
        const V s = T::mul(T::load(row + i + r * T::kLanes), vdecay);
        T::store(row + i + r * T::kLanes, s);
        acc[r] = T::fma(acc[r], s, T::load(k + i + r * T::kLanes));
      }
    float tail = 0.0f;
    for (int64_t i = n32; i < n; ++i) {
      row[i] *= decay;
      tail = std::fma(row[i], k[i], tail);
    }
    const float sk = delta_rule_sum<T>(acc) + tail;
    const float d = (v[j] - sk) * beta;

    const V vd = T::set1(d);
    for (int r = 0; r < kRegs; ++r) acc[r] = T::zero();
    for (int64_t i = 0; i < n32; i += kDeltaRuleLanes)
      for (int r = 0; r < kRegs; ++r) {
        const V s = T::fma(T::load(row + i + r * T::kLanes), T::load(k + i + r * T::kLanes), vd);
        T::store(row + i + r * T::kLanes, s);
        acc[r] = T::fma(acc[r], s, T::load(q + i + r * T::kLanes));
      }
    tail = 0.0f;
    for (int64_t i = n32; i < n; ++i) {
      row[i] = std::fma(k[i], d, row[i]);
      tail = std::fma(row[i], q[i], tail);
    }
    out[j] = (delta_rule_sum<T>(acc) + tail) * out_scale;
  }
}

}  // namespace pllm::kern::drivers
