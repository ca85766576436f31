// Architecture registry: each arch_*.cpp describes how to read its config and weights
// and which forward pass runs it.
#pragma once
#include <string_view>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/arch_loaders.h"
#include "model/config.h"

namespace pllm {

class Model;
struct ModelWeights;
class LayerOps;

struct ArchDescriptor {
  const char* name;  // general.architecture
  Result<ModelConfig> (*read_config)(const GgufFile& f);
  Result<void> (*load_weights)(const GgufFile& f, const ModelConfig& c, ModelWeights& w);
  // The forward pass composed over the layer seam (model/layer_ops.h, model/blocks.h).
  Result<void> (*forward)(const Model& m, LayerOps& ops);
};

// nullptr when the architecture is not supported.
const ArchDescriptor* find_arch(std::string_view name);
// Comma-separated list of supported names, for error messages.
const char* supported_arch_names();

// Llama-family pieces shared by llama, deci and qwen2 (arch_llama.cpp): the embeddings, every
// layer's attention and gated FFN with what `attn` and `ffn` add, and the RoPE frequencies
// (with rope_freqs.weight when the file has it).
Result<void> load_llama_family_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w,
                                       const AttnTensors& attn, const FfnTensors& ffn);
Result<void> llama_family_forward(const Model& m, LayerOps& ops);
extern const ArchDescriptor kArchLlama;
// llama.cpp's "deci" (Nemotron-NAS): the llama block with per-layer feed-forward sizes and
// head counts, which llama.cpp's own llama architecture does not read per layer; pruned
// llama models with layers of different sizes are written as deci. Layers without
// attention or FFN (a count of 0) are not supported.
extern const ArchDescriptor kArchDeci;
extern const ArchDescriptor kArchQwen2;
// Gemma 2 and 3 (arch_gemma3.cpp, arch_gemma2.cpp): scaled embeddings, sliding-window local
// layers with their own RoPE table, GeGLU, post-norms; soft-capping where the config has it.
Result<void> gemma_family_forward(const Model& m, LayerOps& ops);
extern const ArchDescriptor kArchGemma3;
extern const ArchDescriptor kArchGemma2;
// arch_gemma4.cpp: Gemma 4 dense (per-layer inputs, KV sharing, per-layer head sizes).
extern const ArchDescriptor kArchGemma4;
// Over llama_family_forward, one file each: what their config and weights add.
extern const ArchDescriptor kArchQwen3;    // arch_qwen3.cpp
extern const ArchDescriptor kArchSmolLM3;  // arch_smollm3.cpp
extern const ArchDescriptor kArchGranite;  // arch_granite.cpp
extern const ArchDescriptor kArchMiniCPM;  // arch_granite.cpp
extern const ArchDescriptor kArchPhi3;     // arch_phi3.cpp
extern const ArchDescriptor kArchLfm2;     // arch_lfm2.cpp: convolution layers besides attention
// arch_qwen35.cpp: Gated DeltaNet layers besides gated attention (model/blocks.h).
extern const ArchDescriptor kArchQwen35;

}  // namespace pllm
