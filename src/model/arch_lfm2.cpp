// LFM2 (Liquid AI, 350M-2.6B): a hybrid of the llama block's attention layers (GQA with a
// per-head RMSNorm of q and k, NEOX RoPE) and gated short-convolution layers, marked by a
// head_count_kv of 0: x += Wout · (c * conv(b * x)) with [b, c, x] = Win · rmsnorm(x), the
// depthwise causal convolution over the last shortconv.l_cache positions, whose state lives
// in the sequence's cache (model/kv_cache.h). Every layer has the SwiGLU FFN; the final norm
// is named token_embd_norm. (llama.cpp: src/models/lfm2.cpp.)
#include "model/arch.h"

namespace pllm {
namespace {

Result<ModelConfig> read_lfm2_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_transformer_config(f, "lfm2", /*recurrent_layers=*/true));
  c.rope_order = RopeOrder::neox;
  PLLM_ASSIGN(uint64_t taps, f.get_u64("lfm2.shortconv.l_cache"));
  if (taps < 2 || taps > 64)
    return make_error(Status::bad_format, f.path() + ": lfm2.shortconv.l_cache = " + std::to_string(taps) +
                                              " is out of range (2 to 64)");
  c.conv_taps = int(taps);
  if (f.find("lfm2.attention.sliding_window"))
    return make_error(Status::unsupported, f.path() + ": lfm2 with sliding-window attention is not supported");
  return c;
}

Result<void> load_lfm2_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  PLLM_TRY(load_embeddings(f, c, w, "token_embd_norm.weight"));
  PLLM_TRY(load_layers(f, c, w, {.q_k_norm = Presence::required}, {}));
  w.rope_inv_freq = rope_inv_freq(c.rope_base, c.n_rot, c.rope_linear_scale);
  return {};
}

}  // namespace

const ArchDescriptor kArchLfm2 = {"lfm2", read_lfm2_config, load_lfm2_weights, llama_family_forward};

}  // namespace pllm
