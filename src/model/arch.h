// Architecture registry: each arch_*.cpp describes how to read its config and weights
// and which forward pass runs it.
#pragma once
#include <initializer_list>
#include <string_view>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/matmul.h"

namespace pllm {

class Model;
struct ModelWeights;
struct ForwardState;
struct RopeSpec;

struct ArchDescriptor {
  const char* name;  // general.architecture
  Result<ModelConfig> (*read_config)(const GgufFile& f);
  Result<void> (*load_weights)(const GgufFile& f, const ModelConfig& c, ModelWeights& w);
  Result<void> (*forward)(const Model& m, ForwardState& st, const int32_t* tokens, int n, int pos0,
                          float* logits, bool all_logits);
};

// nullptr when the architecture is not supported.
const ArchDescriptor* find_arch(std::string_view name);
// Comma-separated list of supported names, for error messages.
const char* supported_arch_names();

// Llama-family pieces shared by llama and qwen2 (arch_llama.cpp).
Result<void> llama_family_load_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w);
Result<void> llama_family_forward(const Model& m, ForwardState& st, const int32_t* tokens, int n, int pos0,
                                  float* logits, bool all_logits);
// Products sharing the normed input st.h ([n][cols]): one pool job when st.fuse, one per
// product otherwise (--no-fuse). Shared by every architecture (arch_llama.cpp).
void run_group(ForwardState& st, std::initializer_list<MatmulTarget> targets, int n);
// Attention of n batch positions starting at pos0 over layer l's KV cache: st.q -> st.att,
// query heads grouped `group` per kv head (GQA). Shared by every architecture.
void attention(ForwardState& st, int l, int n, int pos0, int group, float scale, const RopeSpec& rope);
extern const ArchDescriptor kArchLlama;
// llama.cpp's "deci" (Nemotron-NAS): the llama block with per-layer feed-forward sizes and
// head counts, which llama.cpp's own llama architecture does not read per layer; pruned
// llama models with layers of different sizes are written as deci. Layers without
// attention or FFN (a count of 0) are not supported.
extern const ArchDescriptor kArchDeci;
extern const ArchDescriptor kArchQwen2;
extern const ArchDescriptor kArchGemma3;  // arch_gemma3.cpp

}  // namespace pllm
