// AVX-512 (F, BW, VL, VNNI) KV-cache segment kernels (KernelTable::attn_seg_*): the
// chunked online softmax of generic/attention_kv_scalar.cpp, with every cache format
// decoded in registers while the segment is streamed once.
//
// Per chunk of kChunk tokens: (1) scores 16 tokens at a time, one 16-lane accumulator
// per token (16 independent chains) and one transpose-reduction for all sixteen, so
// the horizontal sums cost < 3 shuffles+adds per token; a partial last block re-reads
// the chunk's last row (never reads past the segment) and masks those lanes to -inf;
// (2) the chunk maximum and at most one rescale of acc and l; (3) p = exp(s - m), a
// 16-lane Cephes polynomial; (4) acc += p_t v_t in blocks of 64 (f32/f16/q8) or 32 (q4)
// output dims, two tokens per step.
//   q8: the query is quantised once per call exactly like kv_quantize_q8; q.k per group
//       is VPDPBUSD of (k XOR 0x80) as unsigned bytes with the signed query codes, i.e.
//       q.k + 128 * sum(q), corrected by the per-call constant: exact in int32.
//       Values: acc += (p_t * scale_tg) * code.
//   q4: keys as q'.code + bias with q'_c = q_c * k_scale_c and bias = sum q_c * k_min_c
//       computed once per call; values as acc += (p_t * scale_tb) * code per token and
//       sum_t p_t * min_tb added once per 32-channel block.
//
// As in avx512.cpp: anonymous namespace only, no shared inline functions.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/internal.h"

namespace pllm::kern {

namespace {

#define PLLM_AI inline __attribute__((always_inline))

constexpr int kChunk = 64;  // tokens per online-softmax step (multiple of 16)

PLLM_AI __m512 ld16(const float* p) { return _mm512_loadu_ps(p); }
PLLM_AI __m512 ld16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
PLLM_AI float h2f(uint16_t h) { return _cvtsh_ss(h); }

// exp(x) for x <= 0; see x86/attention_avx2.cpp (same reduction and polynomial; 2^n
// applied with vscalefps). x < -87 (incl. -inf) gives 0.
PLLM_AI __m512 exp_neg(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
  x = _mm512_max_ps(x, lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(y, n));
}

// Lane i of the result = sum of the 16 lanes of v[i]. Pairs are interleaved and added
// (32-bit, then 64-bit), leaving four tokens per 128-bit lane, then the 128-bit lanes
// are folded with two rounds of shuffle_x32x4.
PLLM_AI __m512 reduce16(const __m512* v) {
  __m512 w[8], x[4];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 y0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xDD));
  const __m512 y1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x88), _mm512_shuffle_f32x4(x[2], x[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, 0x88), _mm512_shuffle_f32x4(y0, y1, 0xDD));
}

// Same for int32 lanes (exact).
PLLM_AI __m512i reduce16i(const __m512i* v) {
  __m512i w[8], x[4];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                            _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)
    x[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(w[2 * i], w[2 * i + 1]),
                            _mm512_unpackhi_epi64(w[2 * i], w[2 * i + 1]));
  const __m512i y0 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(x[0], x[1], 0x88), _mm512_shuffle_i32x4(x[0], x[1], 0xDD));
  const __m512i y1 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(x[2], x[3], 0x88), _mm512_shuffle_i32x4(x[2], x[3], 0xDD));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(y0, y1, 0x88), _mm512_shuffle_i32x4(y0, y1, 0xDD));
}

// Token rows of a 16-token score block starting at chunk token j: rows past the chunk's
// last token cn - 1 repeat it (their scores are masked off).
PLLM_AI void block_rows(int j, int cn, int* row) {
  for (int i = 0; i < 16; ++i) row[i] = j + i < cn ? j + i : cn - 1;
}

// The chunked online softmax over n tokens. Src::scores16(t, row, out) returns the
// unscaled scores of tokens t + row[i]; Src::accumulate(t, p, cn, acc) adds
// sum_{j < cn} p[j] v_{t+j} to acc.
template <class Src>
PLLM_AI void fold_segment(const Src& src, int n, int hd, float scale, AttnAccum& a) {
  alignas(64) float s[kChunk];
  float m = a.m, l = a.l;
  const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
  for (int t0 = 0; t0 < n; t0 += kChunk) {
    const int cn = n - t0 < kChunk ? n - t0 : kChunk;
    const int cn16 = (cn + 15) & ~15;
    __m512 vm = ninf;
    for (int j = 0; j < cn; j += 16) {
      int row[16];
      block_rows(j, cn, row);
      __m512 sc = _mm512_mul_ps(src.scores16(t0, row), vscale);
      const __mmask16 valid = cn - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cn - j)) - 1);
      sc = _mm512_mask_mov_ps(ninf, valid, sc);
      _mm512_store_ps(s + j, sc);
      vm = _mm512_max_ps(vm, sc);
    }
    const float cm = _mm512_reduce_max_ps(vm);
    if (cm > m) {  // new running maximum: rescale once per chunk (exp(-inf) = 0 at the start)
      const float r = std::exp(m - cm);
      const __m512 vr = _mm512_set1_ps(r);
      for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(a.acc + d, _mm512_mul_ps(_mm512_loadu_ps(a.acc + d), vr));
      l *= r;
      m = cm;
    }
    const __m512 vmax = _mm512_set1_ps(m);
    __m512 vl = _mm512_setzero_ps();
    for (int j = 0; j < cn16; j += 16) {
      const __m512 p = exp_neg(_mm512_sub_ps(_mm512_load_ps(s + j), vmax));
      _mm512_store_ps(s + j, p);
      vl = _mm512_add_ps(vl, p);
    }
    l += _mm512_reduce_add_ps(vl);
    src.accumulate(t0, s, cn, a.acc);
  }
  a.m = m;
  a.l = l;
}

// ---- f32 / f16 rows ----
template <class T>
struct PlainSrc {
  const float* q;
  const T* k;
  const T* v;
  int64_t stride;
  int hd;

  PLLM_AI __m512 scores16(int t0, const int* row) const {
    const T* kr[16];
    for (int i = 0; i < 16; ++i) kr[i] = k + (t0 + row[i]) * stride;
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 16) {
      const __m512 qd = _mm512_loadu_ps(q + d);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(qd, ld16(kr[i] + d), acc[i]);
    }
    return reduce16(acc);
  }

  // acc[0..hd) += sum_{j < cn} p[j] * v_{t0+j}: blocks of 64 dims x two tokens
  // (eight FMA chains), then single 16-dim registers for the rest.
  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    const T* v0 = v + t0 * stride;
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
      __m512 x[4], y[4];
      for (int c = 0; c < 4; ++c) x[c] = _mm512_loadu_ps(acc + d + 16 * c), y[c] = _mm512_setzero_ps();
      const T* vt = v0 + d;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
        const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
        for (int c = 0; c < 4; ++c) x[c] = _mm512_fmadd_ps(p0, ld16(vt + 16 * c), x[c]);
        for (int c = 0; c < 4; ++c) y[c] = _mm512_fmadd_ps(p1, ld16(vt + stride + 16 * c), y[c]);
      }
      if (j < cn) {
        const __m512 p0 = _mm512_set1_ps(p[j]);
        for (int c = 0; c < 4; ++c) x[c] = _mm512_fmadd_ps(p0, ld16(vt + 16 * c), x[c]);
      }
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(acc + d + 16 * c, _mm512_add_ps(x[c], y[c]));
    }
    for (; d < hd; d += 16) {
      __m512 x = _mm512_loadu_ps(acc + d), y = _mm512_setzero_ps();
      const T* vt = v0 + d;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride) {
        x = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), ld16(vt), x);
        y = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 1]), ld16(vt + stride), y);
      }
      if (j < cn) x = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), ld16(vt), x);
      _mm512_storeu_ps(acc + d, _mm512_add_ps(x, y));
    }
  }
};

// ---- q8 ----
struct Q8Src {
  const int8_t* qi;      // query codes (64-byte aligned)
  const float* dq;       // query scale per group
  const int32_t* corr;   // 128 * sum of the query codes per group
  const int8_t* k;
  const float* ks;
  const int8_t* v;
  const float* vs;
  int64_t stride, sstride;
  int hd;

  PLLM_AI __m512 scores16(int t0, const int* row) const {
    const int8_t* kr[16];
    for (int i = 0; i < 16; ++i) kr[i] = k + (t0 + row[i]) * stride;
    const __m512i vrow = _mm512_loadu_si512(row);
    const __m512i sidx = _mm512_mullo_epi32(vrow, _mm512_set1_epi32(int32_t(sstride)));
    const float* ks0 = ks + t0 * sstride;
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    __m512 s = _mm512_setzero_ps();
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const __m512i qg = _mm512_load_si512(qi + g * kKvQ8Group);
      __m512i acc[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const __m512i kb = _mm512_xor_si512(_mm512_loadu_si512(kr[i] + g * kKvQ8Group), flip);
        acc[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), kb, qg);
      }
      const __m512i isum = _mm512_sub_epi32(reduce16i(acc), _mm512_set1_epi32(corr[g]));
      const __m512 dk = _mm512_i32gather_ps(sidx, ks0 + g, 4);
      s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dk, _mm512_set1_ps(dq[g])), s);
    }
    return s;
  }

  // One 64-channel group = four registers; two tokens per step.
  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    for (int g = 0; g < hd / kKvQ8Group; ++g) {
      const int d = g * kKvQ8Group;
      __m512 x[4], y[4];
      for (int c = 0; c < 4; ++c) x[c] = _mm512_loadu_ps(acc + d + 16 * c), y[c] = _mm512_setzero_ps();
      const int8_t* vt = v + t0 * stride + d;
      const float* st = vs + t0 * sstride + g;
      int j = 0;
      for (; j + 2 <= cn; j += 2, vt += 2 * stride, st += 2 * sstride) {
        const __m512 w0 = _mm512_set1_ps(p[j] * st[0]), w1 = _mm512_set1_ps(p[j + 1] * st[sstride]);
        for (int c = 0; c < 4; ++c) {
          const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vt + 16 * c));
          const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vt + stride + 16 * c));
          x[c] = _mm512_fmadd_ps(w0, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b0)), x[c]);
          y[c] = _mm512_fmadd_ps(w1, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b1)), y[c]);
        }
      }
      if (j < cn) {
        const __m512 w0 = _mm512_set1_ps(p[j] * st[0]);
        for (int c = 0; c < 4; ++c) {
          const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vt + 16 * c));
          x[c] = _mm512_fmadd_ps(w0, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b0)), x[c]);
        }
      }
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(acc + d + 16 * c, _mm512_add_ps(x[c], y[c]));
    }
  }
};

// ---- q4 ----
// Codes of 32 channels (16 bytes, ggml nibble order) -> channels 0..15 and 16..31 as f32.
PLLM_AI void q4_decode32(const uint8_t* p, __m512& lo, __m512& hi) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(b, m4)));
  hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), m4)));
}

struct Q4Src {
  const float* qp;  // q_c * k_scale_c (64-byte aligned)
  float bias;       // sum_c q_c * k_min_c
  const KvQ4GroupView* g;
  int hd;
  int base;  // group token of the segment's first token

  PLLM_AI __m512 scores16(int t0, const int* row) const {
    t0 += base;
    const uint8_t* kr[16];
    for (int i = 0; i < 16; ++i) kr[i] = g->k_codes + (t0 + row[i]) * g->code_stride;
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int b = 0; b < hd / 32; ++b) {
      const __m512 qa = _mm512_load_ps(qp + 32 * b), qb = _mm512_load_ps(qp + 32 * b + 16);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        __m512 lo, hi;
        q4_decode32(kr[i] + 16 * b, lo, hi);
        acc[i] = _mm512_fmadd_ps(qb, hi, _mm512_fmadd_ps(qa, lo, acc[i]));
      }
    }
    return _mm512_add_ps(reduce16(acc), _mm512_set1_ps(bias));
  }

  PLLM_AI void accumulate(int t0, const float* p, int cn, float* acc) const {
    t0 += base;
    for (int b = 0; b < hd / 32; ++b) {
      __m512 x0 = _mm512_loadu_ps(acc + 32 * b), x1 = _mm512_loadu_ps(acc + 32 * b + 16);
      __m512 y0 = _mm512_setzero_ps(), y1 = y0;
      float bias = 0.0f;  // sum_t p_t * min_tb, added once for the block
      int j = 0;
      for (; j + 2 <= cn; j += 2) {
        const int64_t t = t0 + j;
        const uint16_t* sc = g->v_scale + t * g->vs_stride + b;
        const uint16_t* mn = g->v_min + t * g->vs_stride + b;
        const __m512 w0 = _mm512_set1_ps(p[j] * h2f(sc[0])), w1 = _mm512_set1_ps(p[j + 1] * h2f(sc[g->vs_stride]));
        bias += p[j] * h2f(mn[0]) + p[j + 1] * h2f(mn[g->vs_stride]);
        __m512 lo, hi;
        q4_decode32(g->v_codes + t * g->code_stride + 16 * b, lo, hi);
        x0 = _mm512_fmadd_ps(w0, lo, x0);
        x1 = _mm512_fmadd_ps(w0, hi, x1);
        q4_decode32(g->v_codes + (t + 1) * g->code_stride + 16 * b, lo, hi);
        y0 = _mm512_fmadd_ps(w1, lo, y0);
        y1 = _mm512_fmadd_ps(w1, hi, y1);
      }
      if (j < cn) {
        const int64_t t = t0 + j;
        const __m512 w0 = _mm512_set1_ps(p[j] * h2f(g->v_scale[t * g->vs_stride + b]));
        bias += p[j] * h2f(g->v_min[t * g->vs_stride + b]);
        __m512 lo, hi;
        q4_decode32(g->v_codes + t * g->code_stride + 16 * b, lo, hi);
        x0 = _mm512_fmadd_ps(w0, lo, x0);
        x1 = _mm512_fmadd_ps(w0, hi, x1);
      }
      const __m512 vb = _mm512_set1_ps(bias);
      _mm512_storeu_ps(acc + 32 * b, _mm512_add_ps(_mm512_add_ps(x0, y0), vb));
      _mm512_storeu_ps(acc + 32 * b + 16, _mm512_add_ps(_mm512_add_ps(x1, y1), vb));
    }
  }
};

void attn_seg_f32(const float* q, const float* k, const float* v, int64_t stride, int n, int hd, float scale,
                  AttnAccum& a) {
  if (n <= 0) return;
  fold_segment(PlainSrc<float>{q, k, v, stride, hd}, n, hd, scale, a);
}

void attn_seg_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t stride, int n, int hd, float scale,
                  AttnAccum& a) {
  if (n <= 0) return;
  fold_segment(PlainSrc<uint16_t>{q, k, v, stride, hd}, n, hd, scale, a);
}

void attn_seg_q8(const float* q, const int8_t* k, const float* k_scale, const int8_t* v, const float* v_scale,
                 int64_t stride, int64_t scale_stride, int n, int hd, float scale, AttnAccum& a) {
  if (n <= 0) return;
  // The query in the cache's format, as kv_quantize_q8 does it: scale amax / 127 (a true
  // division), codes round-to-nearest-even of q / scale (cvtps2dq in the default MXCSR
  // mode), an all-zero group gets codes 0.
  alignas(64) int8_t qi[256];
  float dq[256 / kKvQ8Group];
  int32_t corr[256 / kKvQ8Group];
  for (int g = 0; g < hd / kKvQ8Group; ++g) {
    __m512 x[4], amax = _mm512_setzero_ps();
    for (int c = 0; c < 4; ++c) {
      x[c] = _mm512_loadu_ps(q + g * kKvQ8Group + 16 * c);
      amax = _mm512_max_ps(amax, _mm512_abs_ps(x[c]));
    }
    const float s = _mm512_reduce_max_ps(amax) / 127.0f;
    dq[g] = s;
    __m512i sum = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i ci = _mm512_setzero_si512();
      if (s != 0.0f) {
        ci = _mm512_cvtps_epi32(_mm512_div_ps(x[c], _mm512_set1_ps(s)));
        ci = _mm512_max_epi32(_mm512_min_epi32(ci, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
      }
      sum = _mm512_add_epi32(sum, ci);
      _mm_store_si128(reinterpret_cast<__m128i*>(qi + g * kKvQ8Group + 16 * c), _mm512_cvtepi32_epi8(ci));
    }
    corr[g] = 128 * _mm512_reduce_add_epi32(sum);
  }
  fold_segment(Q8Src{qi, dq, corr, k, k_scale, v, v_scale, stride, scale_stride, hd}, n, hd, scale, a);
}

void attn_seg_q4(const float* q, const KvQ4GroupView& g, int t0, int t1, int hd, float scale, AttnAccum& a) {
  if (t1 <= t0) return;
  alignas(64) float qp[256];
  __m512 vb = _mm512_setzero_ps();
  for (int d = 0; d < hd; d += 16) {
    const __m512 qd = _mm512_loadu_ps(q + d);
    _mm512_store_ps(qp + d, _mm512_mul_ps(qd, ld16(g.k_scale + d)));
    vb = _mm512_fmadd_ps(qd, ld16(g.k_min + d), vb);
  }
  fold_segment(Q4Src{qp, _mm512_reduce_add_ps(vb), &g, hd, t0}, t1 - t0, hd, scale, a);
}

#undef PLLM_AI

}  // namespace

void fill_attention_kv_avx512(KernelTable& t) {
  t.attn_seg_f32 = attn_seg_f32;
  t.attn_seg_f16 = attn_seg_f16;
  t.attn_seg_q8 = attn_seg_q8;
  t.attn_seg_q4 = attn_seg_q4;
}

}  // namespace pllm::kern
