// Storage formats of the compressed KV cache, shared by the cache (model/kv_cache.*),
// the attention kernels that read it (KernelTable::attn_seg_*) and their tests.
//
//   q8: per token, per group of kKvQ8Group channels: symmetric int8, one f32 scale
//       (x = code * scale, scale = amax / 127, code = round(x / scale)).
//   q4: KIVI-style. Tokens are grouped kKvQ4GroupTokens at a time.
//       keys:   per CHANNEL over the group's tokens: asymmetric 4-bit,
//               k[t][c] = k_min[c] + k_scale[c] * code(t, c), code in 0..15 (f16 scale/min);
//       values: per TOKEN, per block of kKvQ4ValueBlock channels: asymmetric 4-bit,
//               v[t][c] = v_min[t][b] + v_scale[t][b] * code(t, c), b = c / 32 (f16 scale/min).
//       Nibble order (keys and values alike): channel c of a token row lives in byte
//       16 * (c / 32) + (c % 16) of that row, low nibble when c % 32 < 16, else high nibble.
//       A group is only quantised once all its tokens are known; until then the most
//       recent tokens stay in a full-precision f16 tail (see model/kv_cache.h).
#pragma once
#include <cstdint>

namespace pllm {

inline constexpr int kKvQ8Group = 64;       // channels per q8 scale
inline constexpr int kKvQ4GroupTokens = 32;  // tokens per q4 key group (per-channel scales)
inline constexpr int kKvQ4ValueBlock = 32;   // channels per q4 value scale/min

// One kv head's slice of a q4 group (kKvQ4GroupTokens tokens). hd = head_dim.
struct KvQ4GroupView {
  const uint16_t* k_scale;  // [hd] fp16, per channel
  const uint16_t* k_min;    // [hd] fp16, per channel
  const uint8_t* k_codes;   // token t: k_codes + t * code_stride, hd / 2 bytes
  const uint16_t* v_scale;  // token t: v_scale + t * vs_stride, hd / 32 fp16
  const uint16_t* v_min;    // token t: v_min + t * vs_stride, hd / 32 fp16
  const uint8_t* v_codes;   // token t: v_codes + t * code_stride, hd / 2 bytes
  int64_t code_stride;      // bytes between consecutive tokens' code rows
  int64_t vs_stride;        // elements between consecutive tokens' value scale rows
};

// Tokens per online-softmax step of the attn_seg_* kernels, counted from a call's first token: a
// segment split at a multiple of it folds in the same steps, bit for bit (KvCache::attend_rows).
inline constexpr int kAttnChunk = 64;

// How a raw score q.k becomes the softmax's input: s = scale * q.k, then, when softcap > 0,
// softcap * tanh(s / softcap) (Gemma 2's attention logit soft-capping). Built from a bare
// scale where there is no cap.
struct AttnScore {
  float scale;
  float softcap = 0.0f;
  AttnScore(float s, float cap = 0.0f) : scale(s), softcap(cap) {}  // NOLINT(google-explicit-constructor)
};

// The widest attention head the kernels take (Gemma 4's full-attention layers: 512).
inline constexpr int kMaxHeadDim = 512;

// Online-softmax state of ONE query head, carried across the segments of the cache
// a query attends to (sinks, then the window, which may wrap around its ring).
struct AttnAccum {
  float m;                     // running maximum of the scaled scores (-inf: nothing seen)
  float l;                     // running sum of exp(score - m)
  alignas(64) float acc[kMaxHeadDim];  // running sum of exp(score - m) * v, [head_dim]
};

// ---- store side (generic/kv_quant.cpp; scalar, runs once per token or per group) ----
// q8: n channels (multiple of kKvQ8Group) -> n codes, n / 64 scales. All-zero groups get scale 0.
void kv_quantize_q8(const float* x, int n, int8_t* codes, float* scales);
void kv_dequantize_q8(const int8_t* codes, const float* scales, int n, float* y);
// q4 values of one token: n channels (multiple of 32) -> n / 2 code bytes, n / 32 scales and mins.
void kv_quantize_q4_values(const float* x, int n, uint8_t* codes, uint16_t* scale, uint16_t* min);
void kv_dequantize_q4_values(const uint8_t* codes, const uint16_t* scale, const uint16_t* min, int n, float* y);
// q4 keys of one full group: token t's f16 row at x + t * x_stride (n channels, multiple of 32),
// t < kKvQ4GroupTokens -> per-channel scale/min [n] and codes (token t at codes + t * code_stride).
void kv_quantize_q4_keys(const uint16_t* x, int64_t x_stride, int n, uint8_t* codes, int64_t code_stride,
                         uint16_t* k_scale, uint16_t* k_min);
// Key of token t (n channels) decoded from a q4 group.
void kv_dequantize_q4_key(const uint8_t* codes, int64_t code_stride, const uint16_t* k_scale,
                          const uint16_t* k_min, int t, int n, float* y);

}  // namespace pllm
