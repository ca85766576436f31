#include "api/inspect.h"

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "quant/types.h"
#include "tokenizer/tokenizer.h"

namespace pllm {
namespace {

nlohmann::json scalar_json(const GgufValue& v) {
  if (auto* u = std::get_if<uint64_t>(&v.scalar)) return *u;
  if (auto* i = std::get_if<int64_t>(&v.scalar)) return *i;
  if (auto* d = std::get_if<double>(&v.scalar)) return *d;
  if (auto* b = std::get_if<bool>(&v.scalar)) return *b;
  const auto s = std::get<std::string_view>(v.scalar);
  // Long strings (chat templates) are shortened; invalid UTF-8 is replaced on dump.
  return std::string(s.substr(0, 512)) + (s.size() > 512 ? "…" : "");
}

}  // namespace

Result<std::string> inspect_file_json(const std::string& path) {
  PLLM_ASSIGN(auto f, GgufFile::open(path));
  nlohmann::json j;
  j["file"] = path;
  j["gguf_version"] = f->version();
  j["alignment"] = f->alignment();
  PLLM_ASSIGN(std::string arch, f->get_string_or("general.architecture", ""));
  j["architecture"] = arch;
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : f->metadata()) {
    if (v.type == GgufType::array)
      meta[k] = {{"array", gguf_type_name(v.elem_type)}, {"length", v.array_len()}};
    else
      meta[k] = scalar_json(v);
  }
  j["metadata"] = meta;

  if (const ArchDescriptor* a = find_arch(arch)) {
    auto c = a->read_config(*f);
    if (!c.ok()) return c.error();
    {
      j["hparams"] = {{"n_layer", c->n_layer},       {"n_embd", c->n_embd},
                      {"n_ff", c->n_ff},             {"n_head", c->n_head},
                      {"n_head_kv", c->n_head_kv},   {"head_dim", c->head_dim},
                      {"n_rot", c->n_rot},           {"n_ctx_train", c->n_ctx_train},
                      {"rope_freq_base", c->rope_base}, {"rms_eps", c->rms_eps},
                      {"rope_order", c->rope_order == RopeOrder::neox ? "neox" : "normal"}};
      if (c->sliding_window > 0) {
        j["hparams"]["sliding_window"] = c->sliding_window;
        if (c->swa_pattern > 0) j["hparams"]["sliding_window_pattern"] = c->swa_pattern;  // else local_layers
        j["hparams"]["rope_freq_base_local"] = c->rope_base_local;
      }
      if (c->attn_scale > 0.0f) j["hparams"]["attn_scale"] = c->attn_scale;
      // What an architecture adds to the llama block (only where it differs from none).
      if (c->embed_scale != 1.0f) j["hparams"]["embedding_scale"] = c->embed_scale;
      if (c->residual_scale != 1.0f) j["hparams"]["residual_scale"] = c->residual_scale;
      if (c->logit_mul != 1.0f) j["hparams"]["logit_scale"] = 1.0f / c->logit_mul;
      if (c->rope_off) j["hparams"]["rope"] = "off";
      if (c->no_rope_step > 0) j["hparams"]["no_rope_every"] = c->no_rope_step;
      if (c->rope_orig_ctx > 0) j["hparams"]["rope_original_context"] = c->rope_orig_ctx;
      if (c->rope_attn_factor != 1.0f) j["hparams"]["rope_attn_factor"] = c->rope_attn_factor;
      if (c->longrope) j["hparams"]["rope_scaling"] = "longrope";
      if (c->attn_softcap > 0.0f) j["hparams"]["attn_logit_softcapping"] = c->attn_softcap;
      if (c->final_softcap > 0.0f) j["hparams"]["final_logit_softcapping"] = c->final_softcap;
      int first_attn = 0;  // the first attention layer (a hybrid model's layer 0 may be a convolution)
      while (first_attn + 1 < c->n_layer && c->is_recurrent(first_attn)) ++first_attn;
      const std::string blk = "blk." + std::to_string(first_attn) + ".";
      if (f->tensor(blk + "attn_qkv.weight")) j["hparams"]["fused_qkv"] = true;
      if (f->tensor(blk + "attn_q_norm.weight")) j["hparams"]["q_k_norm"] = true;
      if (!c->n_ff_uniform()) j["hparams"]["n_ff_per_layer"] = c->n_ff_layer;  // n_ff is the widest
      if (c->conv_taps > 0) {  // a hybrid model's convolution layers (no attention there)
        std::vector<int> conv;
        for (int l = 0; l < c->n_layer; ++l)
          if (c->is_recurrent(l)) conv.push_back(l);
        j["hparams"]["conv_layers"] = conv;
        j["hparams"]["conv_taps"] = c->conv_taps;
      }
      if (c->delta_net()) {  // qwen35: the conv layers are Gated DeltaNet
        j["hparams"]["delta_net_head"] = c->dn_head;
        j["hparams"]["delta_net_k_heads"] = c->dn_k_heads;
        j["hparams"]["delta_net_v_heads"] = c->dn_v_heads;
      }
      if (c->attn_out_gate) j["hparams"]["attn_output_gate"] = true;
      if (!c->local_layer.empty()) {  // gemma4: the sliding-window layers listed
        std::vector<int> local;
        for (int l = 0; l < c->n_layer; ++l)
          if (c->is_local_layer(l)) local.push_back(l);
        j["hparams"]["local_layers"] = local;
      }
      if (!c->head_dim_layer.empty()) {  // gemma4: head_dim is the full layers', the local ones' apart
        for (int l = 0; l < c->n_layer; ++l)
          if (c->is_local_layer(l)) j["hparams"]["head_dim_local"] = c->head_dim_at(l);
        j["hparams"]["n_rot_local"] = c->n_rot_local;
      }
      if (!c->kv_source.empty()) {  // layer -> the layer whose keys and values it reads
        nlohmann::json shared = nlohmann::json::object();
        for (int l = 0; l < c->n_layer; ++l)
          if (c->shares_kv(l)) shared[std::to_string(l)] = c->kv_layer(l);
        j["hparams"]["kv_shared_layers"] = shared;
      }
      if (c->n_embd_per_layer > 0) j["hparams"]["n_embd_per_layer"] = c->n_embd_per_layer;
      if (c->rope_sections[0] + c->rope_sections[1] + c->rope_sections[2] + c->rope_sections[3] > 0)
        j["hparams"]["rope_sections"] = std::vector<int>(c->rope_sections, c->rope_sections + 4);
    }
    j["supported_architecture"] = true;
  } else {
    j["supported_architecture"] = false;
  }

  // Known keys must also make sense: a file whose tokenizer cannot be built is reported.
  if (f->find("tokenizer.ggml.model") || f->find("tokenizer.ggml.tokens")) {
    auto t = Tokenizer::from_gguf(*f);
    if (!t.ok()) return t.error();
  }
  nlohmann::json tok = nlohmann::json::object();
  PLLM_ASSIGN(tok["model"], f->get_string_or("tokenizer.ggml.model", ""));
  PLLM_ASSIGN(tok["pre"], f->get_string_or("tokenizer.ggml.pre", ""));
  if (const GgufValue* t = f->find("tokenizer.ggml.tokens")) tok["n_tokens"] = t->array_len();
  if (const GgufValue* t = f->find("tokenizer.ggml.merges")) tok["n_merges"] = t->array_len();
  for (const char* key : {"bos_token_id", "eos_token_id", "eot_token_id", "unknown_token_id", "padding_token_id"}) {
    PLLM_ASSIGN(uint64_t v, f->get_u64_or(std::string("tokenizer.ggml.") + key, UINT64_MAX));
    if (v != UINT64_MAX) tok[key] = v;
  }
  tok["has_chat_template"] = f->find("tokenizer.chat_template") != nullptr;
  j["tokenizer"] = tok;

  nlohmann::json tensors = nlohmann::json::array();
  uint64_t total_bytes = 0, total_params = 0;
  for (const TensorInfo& t : f->tensors()) {
    auto tr = type_traits(t.type);
    tensors.push_back({{"name", t.name},
                       {"type", tr ? tr->name : "?"},
                       {"supported", tr && tr->supported},
                       {"dims", t.dims},
                       {"bytes", t.n_bytes},
                       {"offset", t.offset}});
    total_bytes += t.n_bytes;
    total_params += t.n_elements;
  }
  j["tensors"] = tensors;
  j["n_tensors"] = f->tensors().size();
  j["tensor_bytes"] = total_bytes;
  j["n_params"] = total_params;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pllm
