// AVX2 + FMA + F16C kernels. Compiled with -mavx2 -mfma -mf16c (see CMakeLists.txt)
// and only ever called after dispatch.cpp has checked the CPU supports them.
//
// File-local kernels are in an anonymous namespace; the shared building blocks are in
// namespace avx2 (simd_avx2.h, decode_avx2.h: AVX2-flagged files only) and the drivers
// (kernels/drivers/) are templates over those types, so no AVX-compiled copy of an
// inline function can be picked by the linker for generic code or another ISA.
#include <immintrin.h>

#include <cstdint>

#include "kernels/drivers/block_dot.h"
#include "kernels/drivers/fused_dot.h"
#include "kernels/internal.h"
#include "kernels/x86/decode_avx2.h"
#include "quant/blocks.h"

namespace pllm::kern {

namespace {

using namespace avx2;  // h2f, hsum, unpack_k4_scales, load_bf16, the decoders (simd_avx2.h, decode_avx2.h)

// 16 packed bytes -> 32 bytes: low nibbles first (elements 0..15), then high nibbles.
inline __m256i nibbles32(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

// The fifth bits of a Q5_0 / Q5_1 block (element j's is bit j of the little-endian word
// qh) as 32 bytes in element order: 0x10 where the bit is set, else 0.
inline __m256i q5_high(const uint8_t* qh) {
  uint32_t h;
  __builtin_memcpy(&h, qh, 4);
  // byte j takes qh byte j / 8 (the shuffle indexes within each 128-bit half, and both
  // halves hold the four bytes), then keeps bit j % 8
  const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                       2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)), sel);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// sum of u8 * s8 products, 4 adjacent bytes per i32 lane (pairs can't saturate here:
// callers keep |u8| * |s8| * 2 <= 32767).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// s8 * s8 via |x| and sign transfer; needs y != -128 (activations are within +-127).
inline __m256i dot_s8s8(__m256i x, __m256i y) {
  return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// ------------------------------------------------------------ quantised dots
// The 32-element block types for drivers::block_dot: bytes(w) is the block's 32 quants in
// element order, signed (q minus the offset) for the types without a min, unsigned for the
// ones with a min (whose activations are Q8_1).
struct BQ4_0 {
  using W = block_q4_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static PLLM_AI __m256i bytes(const W& b) { return _mm256_sub_epi8(nibbles32(b.qs), _mm256_set1_epi8(8)); }
};
struct BQ4_1 {
  using W = block_q4_1;
  using A = block_q8_1;
  static constexpr bool kMin = true;
  static PLLM_AI __m256i bytes(const W& b) { return nibbles32(b.qs); }
};
// Q5_0: q - 16 fits in s8 (-16..15), so the sign trick of Q8_0 applies.
struct BQ5_0 {
  using W = block_q5_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static PLLM_AI __m256i bytes(const W& b) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b.qs), q5_high(b.qh)), _mm256_set1_epi8(16));
  }
};
// Q5_1: unsigned q (0..31) times s8 (31 * 127 * 2 < 32767: maddubs cannot saturate).
struct BQ5_1 {
  using W = block_q5_1;
  using A = block_q8_1;
  static constexpr bool kMin = true;
  static PLLM_AI __m256i bytes(const W& b) { return _mm256_or_si256(nibbles32(b.qs), q5_high(b.qh)); }
};
struct BQ8_0 {
  using W = block_q8_0;
  using A = block_q8_0;
  static constexpr bool kMin = false;
  static PLLM_AI __m256i bytes(const W& b) { return load256(b.qs); }
};

PLLM_AI float act_d(const block_q8_0& a) { return h2f(a.d); }
PLLM_AI float act_d(const block_q8_1& a) { return a.d; }

// The micro-kernel of drivers::block_dot: signed quants through the sign trick (dot_s8s8),
// unsigned ones straight into maddubs (dot_u8s8); two 8-lane accumulator chains.
template <class T>
struct Int8Dot : T {
  using V = __m256;
  static constexpr int kAccs = 2;
  static PLLM_AI V zero() { return _mm256_setzero_ps(); }
  static PLLM_AI V add(V x, V y) { return _mm256_add_ps(x, y); }
  static PLLM_AI float hsum(V v) { return avx2::hsum(v); }
  static PLLM_AI V fold(V acc, const typename T::W& w, const typename T::A& a) {
    const __m256i q = T::bytes(w), y = load256(a.qs);
    const __m256i p = T::kMin ? dot_u8s8(q, y) : dot_s8s8(q, y);
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f(w.d) * act_d(a)), _mm256_cvtepi32_ps(p), acc);
  }
  static PLLM_AI float min(const typename T::W& w, const typename T::A& a) { return h2f(w.m) * a.s; }
};

float vec_dot_q4_K(int64_t n, const void* w_row, const void* xq) {
  const block_q4_K* w = static_cast<const block_q4_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    alignas(16) uint8_t sm[16];
    unpack_k4_scales(w[b].scales, sm);
    const float d = h2f(w[b].d) * a[b].d;
    const float dmin = h2f(w[b].dmin) * a[b].d;
    // mins: m_j * (bsums[2j] + bsums[2j+1]) in i32 lane j
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    const __m256i pm = _mm256_madd_epi16(load256(a[b].bsums), mins);
    accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(pm), accm);
    __m256i sumi = _mm256_setzero_si256();
    const uint8_t* q = w[b].qs;
    const int8_t* y = a[b].qs;
    for (int p = 0; p < 4; ++p, q += 32, y += 64) {
      const __m256i q4 = load256(q);
      const __m256i lo = _mm256_and_si256(q4, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
      const __m256i plo = _mm256_maddubs_epi16(lo, load256(y));
      const __m256i phi = _mm256_maddubs_epi16(hi, load256(y + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(plo, _mm256_set1_epi16(sm[2 * p])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(phi, _mm256_set1_epi16(sm[2 * p + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(_mm256_sub_ps(acc, accm));
}

float vec_dot_q6_K(int64_t n, const void* w_row, const void* xq) {
  const block_q6_K* w = static_cast<const block_q6_K*>(w_row);
  const block_q8_K* a = static_cast<const block_q8_K*>(xq);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0C), m30 = _mm256_set1_epi8(0x30);
  // shuffle pattern: bytes [g x8, g+1 x8]
  const __m128i pat = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = h2f(w[b].d) * a[b].d;
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    // the quants are stored +32: subtract 32 * sum_g sc_g * bsums_g at the end
    const __m256i corr = _mm256_madd_epi16(load256(a[b].bsums), _mm256_cvtepi8_epi16(sc8));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qla = load256(w[b].ql + 64 * h);
      const __m256i qlb = load256(w[b].ql + 64 * h + 32);
      const __m256i qh = load256(w[b].qh + 32 * h);
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(qla, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(qlb, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qla, 4), m4), _mm256_and_si256(qh, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qlb, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k;
        const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_add_epi8(pat, _mm_set1_epi8(static_cast<char>(g)))));
        const __m256i p = _mm256_maddubs_epi16(q[k], load256(a[b].qs + 128 * h + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s));
      }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

// ------------------------------------------------------------ float dots
// Four independent 8-lane accumulators (tests assume >= 8 lanes); n % 8 == 0 here,
// callers add the scalar tail.
template <class Load>
inline float dot_f32_generic(const float* x, int64_t n, Load load) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load(i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(load(i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(load(i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), a0);
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

float dot_f32(const float* a, const float* b, int64_t n) {
  const int64_t full = n & ~int64_t{7};
  float s = dot_f32_generic(b, full, [a](int64_t i) { return _mm256_loadu_ps(a + i); });
  for (int64_t j = full; j < n; ++j) s += a[j] * b[j];
  return s;
}

float vec_dot_f32(int64_t n, const void* w, const void* xq) {
  return dot_f32(static_cast<const float*>(w), static_cast<const float*>(xq), n);
}

float vec_dot_f16(int64_t n, const void* w_row, const void* xq) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  const float* x = static_cast<const float*>(xq);
  const int64_t full = n & ~int64_t{7};
  float s = dot_f32_generic(x, full, [w](int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
  });
  for (int64_t j = full; j < n; ++j) s += h2f(w[j]) * x[j];
  return s;
}


float vec_dot_bf16(int64_t n, const void* w_row, const void* xq) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  const float* x = static_cast<const float*>(xq);
  const int64_t full = n & ~int64_t{7};
  float s = dot_f32_generic(x, full, [w](int64_t i) { return load_bf16(w + i); });
  for (int64_t j = full; j < n; ++j) {
    const uint32_t bits = uint32_t(w[j]) << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    s += f * x[j];
  }
  return s;
}

// ------------------------------------------------------------ dequantisers
// Same operations in the same order as the reference (mul, then add): bit-identical.
void dequant_f16(const void* w_row, float* y, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))));
  for (; i < n; ++i) y[i] = h2f(w[i]);
}

void dequant_bf16(const void* w_row, float* y, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_bf16(w + i));
  for (; i < n; ++i) {
    const uint32_t bits = uint32_t(w[i]) << 16;
    __builtin_memcpy(y + i, &bits, 4);
  }
}

// 32 bytes (u8 or s8 by Signed) -> 32 floats d * (q - off) [+ m]
template <bool Signed>
inline void store32(__m256i q, __m256 d, __m256i off, const __m256* m, float* y) {
  for (int k = 0; k < 4; ++k) {
    const __m128i part = k < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
    const __m128i p8 = (k & 1) ? _mm_srli_si128(part, 8) : part;
    __m256i v = Signed ? _mm256_cvtepi8_epi32(p8) : _mm256_cvtepu8_epi32(p8);
    v = _mm256_sub_epi32(v, off);
    __m256 f = _mm256_mul_ps(d, _mm256_cvtepi32_ps(v));
    if (m) f = _mm256_add_ps(f, *m);
    _mm256_storeu_ps(y + 8 * k, f);
  }
}

void dequant_q4_0(const void* w_row, float* y, int64_t n) {
  const block_q4_0* w = static_cast<const block_q4_0*>(w_row);
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    store32<false>(nibbles32(w[b].qs), _mm256_set1_ps(h2f(w[b].d)), _mm256_set1_epi32(8), nullptr, y + 32 * b);
  }
}

void dequant_q4_1(const void* w_row, float* y, int64_t n) {
  const block_q4_1* w = static_cast<const block_q4_1*>(w_row);
  for (int64_t b = 0; b < n / QK4_1; ++b) {
    const __m256 m = _mm256_set1_ps(h2f(w[b].m));
    store32<false>(nibbles32(w[b].qs), _mm256_set1_ps(h2f(w[b].d)), _mm256_setzero_si256(), &m, y + 32 * b);
  }
}

void dequant_q8_0(const void* w_row, float* y, int64_t n) {
  const block_q8_0* w = static_cast<const block_q8_0*>(w_row);
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    store32<true>(load256(w[b].qs), _mm256_set1_ps(h2f(w[b].d)), _mm256_setzero_si256(), nullptr, y + 32 * b);
  }
}

void dequant_q4_K(const void* w_row, float* y, int64_t n) {
  const block_q4_K* w = static_cast<const block_q4_K*>(w_row);
  const __m256i m4 = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
  for (int64_t b = 0; b < n / QK_K; ++b) {
    uint8_t sm[16];
    unpack_k4_scales(w[b].scales, sm);
    const float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
    for (int p = 0; p < 4; ++p, y += 64) {
      const __m256i q4 = load256(w[b].qs + 32 * p);
      // reference: (d * sc) * q - dmin * m
      const __m256 m1 = _mm256_set1_ps(-(dmin * static_cast<float>(sm[8 + 2 * p])));
      const __m256 m2 = _mm256_set1_ps(-(dmin * static_cast<float>(sm[9 + 2 * p])));
      store32<false>(_mm256_and_si256(q4, m4), _mm256_set1_ps(d * static_cast<float>(sm[2 * p])), zero, &m1, y);
      store32<false>(_mm256_and_si256(_mm256_srli_epi16(q4, 4), m4), _mm256_set1_ps(d * static_cast<float>(sm[2 * p + 1])), zero, &m2, y + 32);
    }
  }
}


}  // namespace

void fill_avx2(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  drivers::set_exact<F32x8, DecF32>(at(TensorType::F32));
  drivers::set_exact<F32x8, DecF16>(at(TensorType::F16));
  drivers::set_exact<F32x8, DecBF16>(at(TensorType::BF16));
  drivers::set_exact<F32x8, DecQ4_0>(at(TensorType::Q4_0));
  drivers::set_exact<F32x8, DecQ4_1>(at(TensorType::Q4_1));
  drivers::set_exact<F32x8, DecQ5_0>(at(TensorType::Q5_0));
  drivers::set_exact<F32x8, DecQ5_1>(at(TensorType::Q5_1));
  drivers::set_exact<F32x8, DecQ8_0>(at(TensorType::Q8_0));
  drivers::set_exact<F32x8, DecQ4_K>(at(TensorType::Q4_K));
  drivers::set_exact<F32x8, DecQ6_K>(at(TensorType::Q6_K));
  at(TensorType::F32).vec_dot = vec_dot_f32;
  at(TensorType::F16).vec_dot = vec_dot_f16;
  at(TensorType::F16).dequantize_row = dequant_f16;
  at(TensorType::BF16).vec_dot = vec_dot_bf16;
  at(TensorType::BF16).dequantize_row = dequant_bf16;
  at(TensorType::Q4_0).vec_dot = drivers::block_dot<Int8Dot<BQ4_0>>;
  at(TensorType::Q4_0).dequantize_row = dequant_q4_0;
  at(TensorType::Q4_1).vec_dot = drivers::block_dot<Int8Dot<BQ4_1>>;
  at(TensorType::Q4_1).dequantize_row = dequant_q4_1;
  at(TensorType::Q5_0).vec_dot = drivers::block_dot<Int8Dot<BQ5_0>>;
  at(TensorType::Q5_1).vec_dot = drivers::block_dot<Int8Dot<BQ5_1>>;
  at(TensorType::Q8_0).vec_dot = drivers::block_dot<Int8Dot<BQ8_0>>;
  at(TensorType::Q8_0).dequantize_row = dequant_q8_0;
  at(TensorType::Q4_K).vec_dot = vec_dot_q4_K;
  at(TensorType::Q4_K).dequantize_row = dequant_q4_K;
  at(TensorType::Q6_K).vec_dot = vec_dot_q6_K;
}

}  // namespace pllm::kern
