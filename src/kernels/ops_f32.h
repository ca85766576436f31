// Small f32 ops used by the forward pass (norms, RoPE, softmax, activations).
// Plain loops the compiler vectorises; the bandwidth-heavy work is in the matvec kernels.
#pragma once
#include <cstdint>

namespace pllm {

// y = x / rms(x) * w   (w may be nullptr for no weight)
void rmsnorm_f32(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary embedding in place on one head of size head_dim, at position `pos`.
// neox=false: rotate adjacent pairs (2i, 2i+1) (GGML "normal", llama);
// neox=true: rotate pairs (i, i + n_rot/2) (qwen2, gemma).
// inv_freq[i] = base^(-2i/n_rot) / freq_factor_i, for i < n_rot/2 (precomputed by the model).
// pos is a double and the angles are computed in double: positions grow without bound
// under a sliding window, and only the query-key angle difference must stay accurate.
// n_rot <= kMaxRopeDims.
inline constexpr int64_t kMaxRopeDims = 512;
void rope_f32(float* x, int64_t n_rot, const float* inv_freq, double pos, bool neox);
// rope_f32 in two steps, so that the heads of one token share the sin/cos work:
// cs[i] = cos, cs[n_rot/2 + i] = sin of the angle of pair i (n_rot floats), then the
// rotation of one head. Together they give exactly rope_f32's result. mscale multiplies
// cos and sin (LongRoPE's attn_factor; rope_f32 has none).
void rope_angles(int64_t n_rot, const float* inv_freq, double pos, float* cs, float mscale = 1.0f);
void rope_apply(float* x, int64_t n_rot, const float* cs, bool neox);

// SwiGLU (out = silu(g) * u) is KernelTable::swiglu_f32.

// GeGLU (out = gelu(g) * u) is KernelTable::geglu_f32.

// y += x
void add_f32(float* y, const float* x, int64_t n);

}  // namespace pllm
