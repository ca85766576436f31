// The non-matmul ops of a step on the device, as free functions recording into a Recorder.
// Activations are f32 rows; every op's CPU twin is named in its comment (kernels/ops_f32.h,
// model/kv_cache.h), and tests/test_vk_ops.cpp holds each one to it.
#pragma once
#include <memory>

#include "backends/vulkan/vk_kernel.h"

namespace pllm::vk {

// The device mirror of one layer's KV cache: slots = positions 0 .. capacity-1 (no ring).
// f32 / f16: K and V rows [capacity][kv_dim] of float / half. q8 (the CPU's KvType::q8:
// int8 codes per channel, one f32 scale per 64 channels): codes [capacity][kv_dim] int8, scales
// [capacity][kv_dim / 64] f32 — byte-for-byte the CPU cache's q8 rows and scales.
enum class KvFormat { f32, f16, q8 };
struct KvLayerViews {
  View k, v;    // rows
  View ks, vs;  // q8 scales (unused otherwise)
};

class OpKernels {
 public:
  static Result<std::unique_ptr<OpKernels>> create(Context& ctx);
  ~OpKernels();

  // out[r] = rmsnorm(in[r]) * w over `width` (rmsnorm_f32; out may be in). Also the per-head
  // q/k norm: n = rows * heads, width = head_dim.
  void rmsnorm(Recorder& rec, View in, View w, View out, int n, int width, float eps) const;
  // x[r][j] += b[j] for n rows of width.
  void add_bias(Recorder& rec, View x, View b, int n, int width) const;
  // x[r] += from[r] + bias (bias may be an empty View), or with post_norm:
  // x[r] += rmsnorm(from[r] + bias) * post_norm.
  void residual(Recorder& rec, View x, View from, View bias, View post_norm, int n, int width, float eps) const;
  // RoPE on n rows of n_heads heads of head_dim (rope_apply): cs holds per row the n_rot
  // floats rope_angles() gives for that row's position (cos, sin pairs); neox or interleaved.
  void rope(Recorder& rec, View x, View cs, int n, int n_heads, int head_dim, int n_rot, bool neox) const;
  // gate[r][j] = act(gate[r][j]) * up[r][j], j < n_ff; act = silu or tanh-GELU (gelu_tanh).
  void glu(Recorder& rec, View gate, View up, int n, int n_ff, bool gelu) const;
  // Stores rows k[i], v[i] (f32 [kv_dim]) at slots pos0 + i, i < n, in format f
  // (KvCache::store's conversion: f16 round-to-nearest-even; q8 as quantize_kv_q8).
  void kv_store(Recorder& rec, View k, View v, const KvLayerViews& kv, KvFormat f, int pos0, int n, int kv_dim) const;
  // Causal attention of n query rows at positions pos0 .. pos0+n-1 of one sequence
  // (KvCache::attend_part over all parts, then the division by the sum): row i, head h sees
  // slots [max(0, pos0 + i - window + 1), pos0 + i] (window 0: from 0) of kv head
  // h / (n_head / n_head_kv); out[i][h] = softmax(scale · q·k) · v. q: [n][n_head * head_dim],
  // out: same shape.
  void attention(Recorder& rec, View q, const KvLayerViews& kv, KvFormat f, View out, int pos0, int n, int n_head,
                 int n_head_kv, int head_dim, float scale, int window) const;

 private:
  OpKernels() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pllm::vk
