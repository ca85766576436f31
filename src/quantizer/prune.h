// Structured pruning of a loaded model into a smaller, standard GGUF: per layer the least
// important FFN channels (rows of ffn_gate/ffn_up, columns of ffn_down) and optionally whole
// KV groups (a kv head with every query head that shares it). Scores and counts:
// quantizer/prune_select.h.
//
// What is written: ffn_gate/ffn_up/attn_q/attn_k/attn_v keep whole rows (each row is its
// own run of quantised blocks, so the bytes are copied, never requantised); ffn_down and
// attn_output lose columns: an output block that is exactly one input block (float types;
// whole heads when head_dim is a multiple of the block) keeps its bytes, every other block
// is dequantised, gathered and quantised again to the same type (PruneOptions::requant). The
// output head is re-quantised when PruneOptions::output_type asks for it. Every other tensor and
// key is copied byte for byte. {arch}.feed_forward_length becomes an array
// when the layers' sizes differ (a scalar when they agree; see pruned_architecture); head counts stay one value for
// every layer (the same fraction of groups goes from each), and key_length/value_length are
// written so n_embd / n_head no longer has to give the head size. Provenance goes to
// pocketllm.prune.*.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "quantizer/act_stats.h"
#include "quantizer/prune_compensate.h"
#include "quantizer/row_quant.h"

namespace pllm {

struct VocabPrune;

// pocketllm.prune.version; 2: compensation (rewritten columns, output biases)
inline constexpr uint32_t kPruneVersion = 2;

struct PruneOptions {
  double ffn_ratio = 0.0;   // fraction of each layer's FFN channels to remove, [0, 0.9]
  double head_ratio = 0.0;  // fraction of each layer's KV groups to remove, [0, 0.9]
  // Activation statistics of this model (ActStats::check_matches passed), or null: then
  // the importance comes from the weights alone.
  const ActStats* stats = nullptr;
  // How rows that lose columns are quantised again (quantizer/row_quant.h): rtn, the
  // reference quantisers; mse, the block search; act, the search weighted by each column's
  // mean x² (needs stats).
  QuantMethod requant = QuantMethod::mse;
  // Also re-quantise the output head (output.weight, or token_embd.weight when the output is
  // tied to it, which then changes the embedding too) to this type, with `requant`'s method
  // and the head's statistics. FFN pruning cannot shrink the head, and on small models it is
  // a large share of the bytes every decoded token reads (SmolLM2: 31 %). Unset: copied.
  std::optional<TensorType> output_type;
  int n_threads = 0;  // for re-quantising the head and fitting the compensation; 0: default
  // How the kept weights make up for the removed channels (quantizer/prune_compensate.h).
  // Anything but none needs `gram`: the Gram matrices of ffn_down's input (and of
  // attn_output's when heads go) on calibration text. The bias modes need an architecture
  // whose llama.cpp graph reads output biases (llama, deci).
  Compensate compensate = Compensate::none;
  double ridge = kDefaultRidge;
  double shrink = kDefaultShrink;  // per-channel shrinkage (quantizer/prune_compensate.h)
  const GramStats* gram = nullptr;
  // FFN channels to keep per layer (a multiple of PrunePlan::ffn_align, at most n_ff), e.g.
  // from plan_ffn_sensitivity (quantizer/prune_plan.h); empty: ffn_ratio in every layer.
  std::vector<int> ffn_keep;
  // Keep only these tokens (quantizer/prune_vocab.h): the embedding's and the head's rows and
  // the tokenizer metadata shrink with them. Null: the vocabulary is copied.
  const VocabPrune* vocab = nullptr;
};

struct LayerPrunePlan {
  int n_ff = 0;                 // before
  std::vector<int> keep_ff;     // kept channels, ascending (size = n_ff after)
  int n_kv = 0;                 // kv heads before
  std::vector<int> keep_kv;     // kept kv heads, ascending
  // With compensation: the kept columns of ffn_down / attn_output after the fit
  // ([n_embd][kept], row-major) and the new output bias ([n_embd], bias modes); empty when the
  // columns are only selected.
  std::vector<float> down_w, down_bias, wo_w, wo_bias;
  double ffn_error = 0.0;       // the fit's mean squared output error per token (compensated)
};

struct PrunePlan {
  std::vector<LayerPrunePlan> layers;
  bool from_activations = false;  // importance used activation statistics
  // Kept FFN channel counts are multiples of ffn_align per layer: the block size of
  // ffn_down's type (its rows are n_ff long), at least 32 (whole SIMD / activation blocks).
  std::vector<int> ffn_align;     // [n_layer]
  int group = 1;                  // query heads per kv head
  int head_dim = 0;
};

// Validates the options against the model (ratios in range; --heads needs more than one kv
// head, a q_dim the attn_output type can hold, and not qwen2, whose llama.cpp graph fixes
// q_dim = n_embd; stats that cover every pruned tensor) and
// scores every layer.
Result<PrunePlan> plan_prune(const Model& model, const PruneOptions& opts);

// Layer l's FFN after removing n_remove channels as opts says (compensated or dropped): the
// kept channels (ascending), the fitted ffn_down columns and bias when compensated
// ([n_embd][kept]; empty otherwise), and error[k], the layer's mean squared output error per
// token after the first k removals (compensated: the fit's exact residual; dropped: the
// removed channels' summed output power).
struct FfnCut {
  std::vector<int> keep;
  std::vector<float> down_w, down_bias;
  std::vector<double> error;
};
Result<FfnCut> cut_ffn(const Model& model, const PruneOptions& opts, int l, int n_remove);

// Metadata and tensors of the pruned model, ready to write. source_name and stats_source
// are recorded in the provenance keys.
Result<void> build_pruned(const Model& model, const PruneOptions& opts, const PrunePlan& plan,
                          const std::string& source_name, GgufWriter& out);

// Whether every layer keeps the same number of FFN channels.
bool plan_ffn_uniform(const PrunePlan& plan);
// The architecture the pruned file is written as: llama.cpp's "llama" reads one
// feed_forward_length for every layer, so a llama model whose layers end up with different
// sizes becomes "deci" (the llama block with per-layer sizes, in llama.cpp and here); qwen2
// and gemma3 have no such twin and keep their name (then only this engine runs them).
std::string pruned_architecture(const ModelConfig& c, const PrunePlan& plan);

// The output head's tensor name: "output.weight", or "token_embd.weight" when tied.
std::string output_head_name(const GgufFile& f);

// Elements of every tensor of a file (the parameter count it reports).
uint64_t count_parameters(const GgufFile& f);

}  // namespace pllm
