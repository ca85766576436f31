// The SigLIP vision transformer and the two projectors, on the CPU: one preprocessed image in,
// its token embeddings (the text model's width) out.
//
//   patches (the conv as a matmul) + bias + position embeddings
//   per layer: x += attn(LN1(x)) (non-causal, all heads), x += W2 gelu(W1 LN2(x))
//   post-LN; then idefics3: pixel shuffle + linear, or gemma3: avg-pool + RMS norm + linear.
//
// Products go through the engine's matmul (backends/cpu) in chunks of rows, so the scratch
// stays small for big encoders; attention and the row-wise ops are spread over the pool.
#pragma once
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/act_mode.h"
#include "vision/mmproj.h"
#include "vision/preprocess.h"

namespace pllm::vision {

struct EncodeOptions {
  // int16 (the default, as for text): products of quantised weights with activations rounded
  // per 32 values to int16, exact integer sums (on the panels of a model loaded with
  // repack_for(int16)); float weights (F16, F32) take the exact path. exact: weights decoded in
  // registers against f32 activations (the reference); int8 makes Q8_0 products integer as
  // llama.cpp does them.
  ActMode act = kDefaultActMode;
};

// Tokens out for one image of this size (which must be image_size square for these encoders).
Result<int> output_tokens(const VisionModel& m, const ImageF32& img);

// out: [tokens][hp.n_out]. Errors for an image of the wrong size.
Result<std::vector<float>> encode_image(const VisionModel& m, const ImageF32& img, ThreadPool& pool,
                                        const EncodeOptions& opt = {});

// Every image of a preprocessed set, concatenated in order.
Result<std::vector<float>> encode_images(const VisionModel& m, const Preprocessed& pre, ThreadPool& pool,
                                         const EncodeOptions& opt = {});

// The f32 row ops the encoder uses (plain loops: these are their scalar versions).
// LayerNorm with weight and bias (w, b may be null): y = (x - mean) / sqrt(var + eps) * w + b.
void layernorm_f32(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// GELU, tanh approximation (ggml_gelu's formula, in f32 without its f16 table), with libm's
// tanh: the plain reference the tests hold the kernel table's GeGLU (which the encoder runs) to.
void gelu_f32(float* x, int64_t n);

}  // namespace pllm::vision
