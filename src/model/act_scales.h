// Static int8 activation scales stored in a GGUF file's metadata, one f32 per matrix
// product: pocketllm.act_scale.<weight tensor name> = d, the step of the product's input
// (written by `pocketllm calibrate-act`; used with ActMode::int8_static).
#pragma once
#include <string>
#include <string_view>

#include "base/result.h"
#include "gguf/gguf.h"

namespace pllm {

struct ModelWeights;

inline constexpr std::string_view kActScalePrefix = "pocketllm.act_scale.";
inline std::string act_scale_key(std::string_view tensor) { return std::string(kActScalePrefix) + std::string(tensor); }

// A scale must be a finite d in [kMinActScale, kMaxActScale]: positive, and a normal
// fp16 number (Q8_0-style activation blocks store their step as fp16).
inline constexpr float kMinActScale = 6.103515625e-05f;  // 2^-14, the smallest normal fp16
inline constexpr float kMaxActScale = 65504.0f;          // the largest fp16

// Matrix products of a model, by how --static-act treats them: n_static have a scale;
// n_dynamic have int8 kernels but no scale (they keep dynamic per-block quantisation);
// products with float weights take f32 activations in every int8 mode and count in neither.
struct ActScaleCounts {
  int n_static = 0;
  int n_dynamic = 0;
};

// Reads every pocketllm.act_scale.* key of f and stores the scales in w's matrices.
// Products that share an input (a layer's Q/K/V; gate/up) are quantised from one copy of
// it, so all of them get the largest scale given for any of them (a scale describes the
// input, which is the same tensor). Errors (naming file and key): a value that is not an
// f32, not finite or outside [kMinActScale, kMaxActScale], or a key that names no matrix
// product of this model.
Result<ActScaleCounts> apply_act_scales(const GgufFile& f, ModelWeights& w);

}  // namespace pllm
