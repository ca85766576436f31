// The kernel dispatch table: one per process, filled once from CPU features.
//
// Matrix-vector products follow the ggml scheme: the activation row is first
// converted into the "activation format" that the weight type's dot kernel wants
// (int8 blocks for W4A8/W8A8 paths, plain f32 for float weights), then every weight
// row is dotted against it. Rows can be split across threads freely.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kv_format.h"
#include "quant/types.h"

namespace pllm {

// Values index the dispatch tables: new levels are appended. avxvnni: the avx2 table with int16
// kernels on AVX-VNNI's ymm vpdpwssd (Alder Lake and later without AVX-512, Zen 5).
enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2, neon = 3, neon_dotprod = 4, neon_i8mm = 5, avxvnni = 6 };
inline constexpr int kIsaCount = 7;
const char* isa_name(Isa isa);

struct TypeKernels {
  bool available = false;
  TensorType act_type = TensorType::F32;  // format quantize_act writes
  // Bytes needed by quantize_act for n elements (n a multiple of the weight block size).
  size_t (*act_bytes)(int64_t n) = nullptr;
  // Convert an f32 activation row of n elements into the activation format.
  void (*quantize_act)(const float* x, void* xq, int64_t n) = nullptr;
  // The same format with a static scale d > 0 for every block instead of each block's
  // absmax / 127 (ref::quantize_row_q8_*_static: q = clamp(round(x / d), -127, 127)).
  // Null where act_type is F32. SIMD versions are bit-identical to the scalar twins.
  void (*quantize_act_static)(const float* x, void* xq, int64_t n, float d) = nullptr;
  // Dot product of one weight row (n elements, this type) with a converted activation row.
  float (*vec_dot)(int64_t n, const void* w_row, const void* xq) = nullptr;
  // Dequantize one weight row (n elements) to f32.
  void (*dequantize_row)(const void* w_row, float* y, int64_t n) = nullptr;
  // Exact mode: dot of one weight row (n elements) with f32 activations x, dequantising
  // in registers. The weights are decoded to exactly the floats dequantize_row gives;
  // SIMD versions accumulate in f32 with >= 8 independent lanes per activation row,
  // the scalar twins in double.
  float (*vec_dot_f32)(int64_t n, const void* w_row, const float* x) = nullptr;
  // Exact mode, several activation rows: out[j * out_stride] = dot(w_row, x + j * x_stride)
  // for j < n_x. Each weight block is decoded once and used for up to 8 rows (larger n_x
  // is handled in groups of 8); every out[j] equals vec_dot_f32 of that row up to rounding.
  void (*vec_dot_f32_multi)(int64_t n, const void* w_row, const float* x, int64_t x_stride, int n_x,
                            float* out, int64_t out_stride) = nullptr;

  // ---- prefill GEMM (kernels: generic/dot_loops.cpp, x86/gemm_avx*.cpp, arm/gemm_dotprod.cpp, arm/gemm_i8mm.cpp)
  // Integer GEMM tile for prefill: out[x * out_stride + r] = vec_dot(n, w + r * w_stride, xq + x * xq_stride)
  // for r < n_rows, x < n_x; same activation format as quantize_act. Must equal looping vec_dot
  // up to f32 rounding (integer block sums are exact; only the float scale accumulation may differ).
  // Set for every type with an int8 activation format; where an ISA has no tiled kernel for a
  // type it is that ISA's vec_dot in a loop. Writes nothing outside the tile.
  void (*gemm_q8)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride,
                  int n_x, float* out, int64_t out_stride) = nullptr;

  // ---- decode matvec, several weight rows at once (kernels: generic/dot_loops.cpp,
  // x86/rows_avx*.cpp; ARM loops its one-row kernels). Never null for an available type: where an ISA
  // has no multi-row kernel for a type it is that ISA's vec_dot / vec_dot_f32 in a loop.
  // Writes out[0 .. n_rows-1] only; n_rows >= 1; row r starts at (const uint8_t*)w + r * w_stride.
  // Several weight rows against ONE activation row: out[r] = vec_dot(n, w + r*w_stride, xq)
  // up to f32 rounding (integer block sums exact; same error bound as vec_dot).
  void (*vec_dot_rows)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, float* out) = nullptr;
  // Several weight rows against n_x activation rows (a batched decode step, 2 <= n_x <= 8 in
  // practice; any n_x >= 1 works): out[x * out_stride + r] = vec_dot(n, w + r*w_stride, xq + x*xq_stride),
  // same bound as vec_dot_rows. Unlike gemm_q8 nothing is repacked per call: each weight row is
  // read from memory once for all n_x rows. Where an ISA has no tiled kernel it is vec_dot in a
  // loop over small groups of weight rows (kept in L1 while every activation row passes).
  void (*vec_dot_rows_multi)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride,
                             int n_x, float* out, int64_t out_stride) = nullptr;
  // Same for the exact path with f32 activations: out[r] = vec_dot_f32(n, w + r*w_stride, x)
  // up to rounding (same decoded weights, >= 8 f32 lanes per row as for vec_dot_f32).
  void (*vec_dot_f32_rows)(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x, float* out) = nullptr;
  // Exact path, a batched decode step: n_rows weight rows against n_x f32 activation rows (x_stride
  // floats apart): out[j * out_stride + r] = vec_dot_f32(n, w + r*w_stride, x + j*x_stride) up to
  // rounding (>= 8 f32 lanes per pair, as vec_dot_f32_multi). SIMD tables tile a few weight rows x
  // the activation rows in registers (drivers/exact_tile.h); the scalar twin loops vec_dot_f32_multi.
  void (*vec_dot_f32_rows_multi)(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x,
                                 int64_t x_stride, int n_x, float* out, int64_t out_stride) = nullptr;
  // Exact path, prefill: the same arguments and bit for bit the same results as
  // vec_dot_f32_rows_multi, faster for many activation rows (SIMD tables decode each weight
  // block once per 64 rows into an L1 buffer: drivers/exact_gemm.h). The scalar table's is its
  // vec_dot_f32_rows_multi. Never null for an available type.
  void (*gemm_f32)(int64_t n, const void* w, size_t w_stride, int n_rows, const float* x, int64_t x_stride,
                   int n_x, float* out, int64_t out_stride) = nullptr;
  // Decode over load-time repacked weights (quant/panel.h; Q4_0, Q4_1, Q8_0): n_panels
  // panels of 16 rows (n elements each) back to back at w, against ONE activation row in
  // quantize_act's format: out[16 p + i] = vec_dot(row i of panel p) up to f32 rounding
  // (integer block sums exact). Null where this ISA has no panel kernel: the model then
  // keeps the file's layout for that type.
  void (*vec_dot_panels)(int64_t n, const void* w, int n_panels, const void* xq, float* out) = nullptr;
  // Prefill over repacked panels: gemm_q8 with w in panel layout (n_rows a multiple of 16,
  // w_stride the file's row bytes, so rows r.. start at w + r * w_stride). Null where the
  // ISA has none: matmul then unpacks the panels and calls gemm_q8.
  void (*gemm_q8_panels)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride,
                         int n_x, float* out, int64_t out_stride) = nullptr;
  // ---- end decode matvec

  // ---- W4A16: fp16 activations (kernels: generic/f16act_scalar.cpp, x86/f16act_avx2.cpp,
  // arm/f16act_neon*.cpp). Activation format: the f32 row rounded once to IEEE half
  // (KernelTable::f32_to_f16_row), n uint16_t. Weights are decoded in registers. Set for
  // Q4_0, Q4_1 and Q8_0 only; null elsewhere (those types take the exact path).
  // The scalar twins give the dot of dequantize_row's weights with the half activations
  // (accumulated in double); x86 kernels accumulate in f32 with >= 8 lanes (as vec_dot_f32);
  // ARM kernels with FP16 arithmetic accumulate 4 products per fp16 lane within each 32-element
  // block and widen to f32 once per block (error <= ~4 * 2^-11 relative per block term, see
  // tests/cpp/test_f16act.cpp). An fp16 overflow (|x| beyond ~2000) is detected and that row
  // recomputed with f32 accumulation.
  float (*vec_dot_f16act)(int64_t n, const void* w_row, const uint16_t* xh) = nullptr;
  // Several activation rows (as vec_dot_f32_multi): out[j * out_stride] = vec_dot_f16act(n, w_row,
  // xh + j * x_stride) up to rounding, for j < n_x; each weight block decoded once per group of rows.
  void (*vec_dot_f16act_multi)(int64_t n, const void* w_row, const uint16_t* xh, int64_t x_stride, int n_x,
                               float* out, int64_t out_stride) = nullptr;
  // ---- end W4A16

  // ---- int16 activations (ActMode::int16; kernels: generic/i16act_scalar.cpp,
  // x86/i16act_avx2.cpp, x86/i16act_avxvnni.cpp, x86/i16act_avx512.cpp, arm/i16act_neon.cpp,
  // arm/i16act_dotprod.cpp). Activation format:
  // block_q16 rows written by KernelTable::quantize_row_q16. A tile of n_rows weight rows
  // (w_stride bytes apart) against n_x activation rows (xq_stride bytes apart; any n_x >= 1, <= 8
  // in practice): out[x * out_stride + r] = dot(weight row r, activation row x). The scalar twins give the dot of
  // dequantize_row's weights with d * qs, accumulated in double; SIMD kernels sum each block's
  // integer products exactly (int16 x int16 -> int32) and accumulate block terms in f32.
  // Set only where this ISA has its own kernel (the scalar table has every twin); null types
  // take the exact path.
  void (*vec_dot_i16act_tile)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq,
                              size_t xq_stride, int n_x, float* out, int64_t out_stride) = nullptr;
  // Prefill: the same arguments and bit for bit the same results as vec_dot_i16act_tile, faster
  // for many activation rows (drivers/i16_gemm.h: one decode of each weight group per 64 rows,
  // vpdpwssd or vpmaddwd with a weight row per lane). Where this ISA has none it is the tile itself; null
  // where the tile is.
  void (*gemm_i16)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride,
                   int n_x, float* out, int64_t out_stride) = nullptr;
  // Over load-time repacked panels (quant/panel.h; Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K): n_panels panels of 16 rows
  // back to back at w against n_x activation rows (any n_x >= 1): out[x * out_stride + 16 p + i]
  // = vec_dot_i16act_tile's result for row i of panel p, bit for bit. Null where this ISA has
  // none: the model then keeps those weights in the file's layout for int16 sessions.
  void (*gemm_i16_panels)(int64_t n, const void* w, int n_panels, const void* xq, size_t xq_stride, int n_x,
                          float* out, int64_t out_stride) = nullptr;
  // ---- end int16 activations
};

struct KernelTable {
  Isa isa = Isa::scalar;
  // Indexed by the ggml type id (TensorType value); entries for unsupported types are unavailable.
  TypeKernels types[32];
  // W4A16 activation format: y[i] = x[i] rounded to IEEE half (nearest even; overflow -> inf).
  // Bit-identical on every ISA.
  void (*f32_to_f16_row)(const float* x, uint16_t* y, int64_t n) = nullptr;
  // int16 mode runs a prompt's rows in int16 only where this ISA has its own gemm_i16 kernels
  // (AVX2, AVX-VNNI, AVX-512; else exact: the tile alone is slower there than exact mode's f32 GEMM). Set by
  // dispatch from the filled table.
  bool int16_prompts = false;
  // int16 activation format: n (a multiple of 32) floats to n / 32 block_q16: per block
  // d = amax / 32767, qs = round-half-even(x * (1 / d)) (0 where amax is 0), sum = sum(qs).
  // Bit-identical on every ISA.
  void (*quantize_row_q16)(const float* x, void* y, int64_t n) = nullptr;
  // out[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i] (out may alias g or u).
  // The scalar twin uses expf; SIMD versions a polynomial exp within a few ulp of it.
  void (*swiglu_f32)(const float* g, const float* u, float* out, int64_t n) = nullptr;
  // out[i] = gelu(g[i]) * u[i] with GELU's tanh approximation (Gemma's GeGLU), in the logistic
  // form 0.5 g (1 + tanh(y)) = g / (1 + exp(-2y)), y = sqrt(2/pi) (g + 0.044715 g^3), which
  // does not cancel for negative g (out may alias g or u). Scalar twin: expf; SIMD versions
  // the swiglu_f32 polynomial exp.
  void (*geglu_f32)(const float* g, const float* u, float* out, int64_t n) = nullptr;
  // One position of a Gated DeltaNet head (qwen35), the delta rule with a decay, over the state
  // S [n][n] stored value-major (S[j * n + i] = S[i][j]: row j holds value channel j over the
  // key channels i, so every step reads contiguous rows):
  //   S *= decay;  d = (v - S^T k) * beta;  S += k d^T;  out = S^T q * out_scale
  // with q, k [n] (key channels) and v, out [n] (value channels). Row j is decayed, dotted with
  // k, updated and dotted with q before the next. The dot products' order is fixed
  // (drivers/delta_rule.h), so every table gives the scalar twin's result bit for bit.
  void (*delta_rule_step)(float* S, const float* q, const float* k, const float* v, float decay, float beta,
                          float out_scale, int64_t n, float* out) = nullptr;

  // --- KV-cache attention by segments (generic/attention_kv_scalar.cpp, x86/attention_kv_*.cpp,
  // arm/attention_kv_neon.cpp). Each call folds n tokens of one kv head into the online-softmax
  // states of the n_q query heads that share it (grouped-query attention; 1 <= n_q <= 16):
  // query j is q + j * hd (contiguous), its state a[j]. Head dim hd <= kMaxHeadDim (512), multiple of 16
  // (multiple of 64 for q8/q4). Per head, independently of the others:
  //   s_t = scale * q.k_t (then soft-capped: AttnScore);  m' = max(m, s_t...);  l, acc rescaled by exp(m - m') and
  //   l += exp(s_t - m'), acc += exp(s_t - m') * v_t,
  // i.e. the same result (up to f32 rounding) as n_q calls with one head each; the point of
  // several heads per call is that each chunk of keys and values is loaded and decoded once
  // for all of them. n <= 0 leaves the states unchanged. Start with attn_accum_init, end with
  // attn_accum_finish. Token t of a segment is at k + t * stride (elements), likewise v.
  // No heap allocation.
  void (*attn_seg_f32)(const float* q, int n_q, const float* k, const float* v, int64_t stride, int n, int hd,
                       AttnScore score, AttnAccum* a) = nullptr;
  void (*attn_seg_f16)(const float* q, int n_q, const uint16_t* k, const uint16_t* v, int64_t stride, int n,
                       int hd, AttnScore score, AttnAccum* a) = nullptr;
  // q8 (kv_format.h): codes at k + t * stride (int8), scales at k_scale + t * scale_stride (hd / 64
  // f32 each), same for v. Each query is quantised inside the kernel exactly like the cache (int8
  // per group of 64, scale amax/127, round to nearest even) so q.k is an exact integer sum per group:
  //   s_t = scale * sum_g dq_g * dk_{t,g} * sum_{i in g} qi * ki.
  void (*attn_seg_q8)(const float* q, int n_q, const int8_t* k, const float* k_scale, const int8_t* v,
                      const float* v_scale, int64_t stride, int64_t scale_stride, int n, int hd, AttnScore score,
                      AttnAccum* a) = nullptr;
  // q4 (kv_format.h): tokens t0 <= t < t1 of one group (0 <= t0 <= t1 <= kKvQ4GroupTokens);
  // keys and values decoded to f32 in registers, q stays f32.
  void (*attn_seg_q4)(const float* q, int n_q, const KvQ4GroupView& g, int t0, int t1, int hd, AttnScore score,
                      AttnAccum* a) = nullptr;
  // --- end KV-cache attention ---

  const TypeKernels& for_type(TensorType t) const { return types[static_cast<uint32_t>(t) & 31]; }
};

// The table for the best ISA this CPU supports, capped by the environment
// variable PLLM_ISA (scalar|avx2|avxvnni|avx512|neon|dotprod|i8mm) if set. Filled on first call
// (thread-safe); immutable afterwards.
const KernelTable& kernels();

inline void attn_accum_init(AttnAccum& a, int head_dim) {
  a.m = -__builtin_inff();
  a.l = 0.0f;
  for (int d = 0; d < head_dim; ++d) a.acc[d] = 0.0f;
}
// out = acc / l, or zeros when no token was seen.
inline void attn_accum_finish(const AttnAccum& a, int head_dim, float* out) {
  const float inv = a.l > 0.0f ? 1.0f / a.l : 0.0f;
  for (int d = 0; d < head_dim; ++d) out[d] = a.acc[d] * inv;
}

// A table for a specific ISA (for tests comparing each ISA with its scalar twin).
// Returns nullptr when this CPU or build cannot run that ISA.
const KernelTable* kernels_for(Isa isa);

// The ISA kernels() selects for a PLLM_ISA value (nullptr or "" = unset): the best
// runnable level whose rank (scalar 0; avx2, neon 1; avxvnni, dotprod 2; avx512, i8mm 3) does not
// exceed the requested one. An unrecognised value sets *unknown (if non-null) and
// yields the best runnable level. Pure: does not print and does not read the env.
Isa select_isa(const char* request, bool* unknown);

}  // namespace pllm
