// Gemma 3 (text; e.g. Gemma 3 270M), as llama.cpp's gemma3 graph and HF Gemma3 compute it:
//   x = embed(token) * sqrt(n_embd)
//   per layer l (local = sliding-window layer unless (l + 1) % swa_pattern == 0):
//     q, k, v = Wq·h, Wk·h, Wv·h   with h = rmsnorm(x) * attn_norm
//     q, k   <- per-head rmsnorm (attn_q_norm / attn_k_norm), then NEOX RoPE with base
//               rope_base_local (10000) on local layers, rope_base (1e6, linear scaling) on global ones
//     att    = softmax(attn_scale * q·k) v over positions pos_k <= pos_q, and on local layers
//               only pos_q - pos_k < sliding_window; GQA
//     x     += rmsnorm(Wo·att) * post_attention_norm
//     x     += rmsnorm(Wdown·(gelu_tanh(Wgate·h) * (Wup·h))) * post_ffw_norm   with h = rmsnorm(x) * ffn_norm
//   logits = token_embd · (rmsnorm(x) * output_norm)   (tied; no final soft-capping in Gemma 3)
// The GGUF norm weights already include Gemma's "+1", so every norm is a plain x / rms(x) * w.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "base/trace.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"
#include "model/arch.h"
#include "model/forward_state.h"
#include "model/matmul.h"
#include "model/model.h"

namespace pllm {
namespace {

constexpr const char* kArch = "gemma3";

Result<ModelConfig> read_gemma3_config(const GgufFile& f) {
  PLLM_ASSIGN(ModelConfig c, read_llama_family_config(f, kArch));
  const std::string p = std::string(kArch) + ".";
  c.rope_order = RopeOrder::neox;

  PLLM_ASSIGN(uint64_t window, f.get_u64(p + "attention.sliding_window"));
  if (window == 0 || window > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": attention.sliding_window out of range");
  c.sliding_window = static_cast<int>(window);
  // llama.cpp fixes the pattern at 6 for gemma3; honour the key when a file has it.
  c.swa_pattern = 6;
  if (const GgufValue* v = f.find(p + "attention.sliding_window_pattern")) {
    if (v->type == GgufType::array)
      return make_error(Status::unsupported, f.path() + ": a per-layer sliding_window_pattern is not supported");
    PLLM_ASSIGN(uint64_t pat, f.get_u64(p + "attention.sliding_window_pattern"));
    if (pat == 0 || pat > 1024)
      return make_error(Status::bad_format, f.path() + ": attention.sliding_window_pattern out of range");
    c.swa_pattern = static_cast<int>(pat);
  }
  PLLM_ASSIGN(double base_local, f.get_f64_or(p + "rope.freq_base_swa", 10000.0));
  if (!(base_local > 0.0)) return make_error(Status::bad_format, f.path() + ": rope.freq_base_swa out of range");
  c.rope_base_local = static_cast<float>(base_local);

  // Queries are scaled by query_pre_attn_scalar^-0.5: head_dim for every size except the
  // 27B (62 layers), which uses n_embd / n_head (llama.cpp does the same).
  float qpas = float(c.head_dim);
  if (c.n_layer == 62) qpas = float(c.n_embd) / float(c.n_head);
  PLLM_ASSIGN(double scale, f.get_f64_or(p + "attention.scale", 1.0 / std::sqrt(double(qpas))));
  if (!(scale > 0.0)) return make_error(Status::bad_format, f.path() + ": attention.scale out of range");
  c.attn_scale = static_cast<float>(scale);
  return c;
}

Result<void> load_gemma3_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  const TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb) return make_error(Status::bad_format, f.path() + ": missing tensor 'token_embd.weight'");
  if (emb->dims.size() != 2 || emb->dims[1] == 0 || emb->dims[1] > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": tensor 'token_embd.weight' has a bad shape");
  const int64_t n_vocab = int64_t(emb->dims[1]);
  const int E = c.n_embd, HD = c.head_dim;
  PLLM_ASSIGN(w.token_embd, get_matrix(f, "token_embd.weight", n_vocab, E));  // [n_vocab x n_embd]
  PLLM_ASSIGN(w.output_norm, get_vector(f, "output_norm.weight", E));         // [n_embd]
  if (f.tensor("output.weight")) {
    PLLM_ASSIGN(w.output, get_matrix(f, "output.weight", n_vocab, E));        // [n_vocab x n_embd]
  } else {
    w.output = w.token_embd;  // tied (every released Gemma 3)
  }
  w.layers.resize(size_t(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", E));                       // [n_embd]
    PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", c.q_dim(), E));                      // [q_dim x n_embd]
    PLLM_ASSIGN(L.wk, get_matrix(f, p + "attn_k.weight", c.kv_dim(), E));                     // [kv_dim x n_embd]
    PLLM_ASSIGN(L.wv, get_matrix(f, p + "attn_v.weight", c.kv_dim(), E));                     // [kv_dim x n_embd]
    PLLM_ASSIGN(L.attn_q_norm, get_vector(f, p + "attn_q_norm.weight", HD));                  // [head_dim]
    PLLM_ASSIGN(L.attn_k_norm, get_vector(f, p + "attn_k_norm.weight", HD));                  // [head_dim]
    PLLM_ASSIGN(L.wo, get_matrix(f, p + "attn_output.weight", E, c.q_dim()));                 // [n_embd x q_dim]
    PLLM_ASSIGN(L.post_attn_norm, get_vector(f, p + "post_attention_norm.weight", E));        // [n_embd]
    PLLM_ASSIGN(L.ffn_norm, get_vector(f, p + "ffn_norm.weight", E));                         // [n_embd]
    PLLM_ASSIGN(L.w_gate, get_matrix(f, p + "ffn_gate.weight", c.n_ff_at(i), E));                   // [n_ff x n_embd]
    PLLM_ASSIGN(L.w_up, get_matrix(f, p + "ffn_up.weight", c.n_ff_at(i), E));                       // [n_ff x n_embd]
    PLLM_ASSIGN(L.w_down, get_matrix(f, p + "ffn_down.weight", E, c.n_ff_at(i)));                   // [n_embd x n_ff]
    PLLM_ASSIGN(L.post_ffn_norm, get_vector(f, p + "post_ffw_norm.weight", E));               // [n_embd]
  }
  // RoPE: global layers use rope_base and the linear scaling, local layers their own base, unscaled.
  const int half = c.n_rot / 2;
  w.rope_inv_freq.resize(size_t(half));
  w.rope_inv_freq_local.resize(size_t(half));
  for (int i = 0; i < half; ++i) {
    const double e = -2.0 * i / double(c.n_rot);
    w.rope_inv_freq[size_t(i)] = float(std::pow(double(c.rope_base), e) / double(c.rope_linear_scale));
    w.rope_inv_freq_local[size_t(i)] = float(std::pow(double(c.rope_base_local), e));
  }
  return {};
}


Result<void> gemma3_forward(const Model& m, ForwardState& st, const int32_t* tokens, int n, int pos0,
                            float* logits, bool all_logits) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const KernelTable& kt = kernels();
  ThreadPool& pool = *st.pool;
  const int E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim(), HD = c.head_dim;
  const int group = c.n_head / c.n_head_kv;
  Tracer* tr = st.tracer;

  {
    TraceScope ts(tr, "embed");
    const float emb_scale = std::sqrt(float(E));
    for (int i = 0; i < n; ++i) {
      const int32_t id = tokens[i];
      if (id < 0 || id >= w.token_embd.rows)
        return make_error(Status::invalid_argument, "token id " + std::to_string(id) + " is out of range");
      float* x = st.x.data() + size_t(i) * E;
      alignas(64) uint8_t buf[kMaxPanelRowBytes];
      kt.for_type(w.token_embd.type).dequantize_row(file_row(w.token_embd, id, buf), x, E);
      for (int j = 0; j < E; ++j) x[j] *= emb_scale;
    }
  }

  for (int l = 0; l < c.n_layer; ++l) {
    if (st.cancel && st.cancel->load(std::memory_order_relaxed))
      return make_error(Status::cancelled, "cancelled");
    const LayerWeights& L = w.layers[size_t(l)];
    const int F = c.n_ff_at(l);  // this layer's feed-forward size (pruned models differ per layer)
    const bool local = c.is_local_layer(l);
    const float* inv_freq = local ? w.rope_inv_freq_local.data() : w.rope_inv_freq.data();

    // --- attention block ---
    {
      TraceScope ts(tr, "attn_norm", l);
      for (int i = 0; i < n; ++i) rmsnorm_f32(&st.x[size_t(i) * E], L.attn_norm, &st.h[size_t(i) * E], E, c.rms_eps);
    }
    {
      TraceScope ts(tr, "qkv", l);
      run_group(st, {{&L.wq, st.q.data()}, {&L.wk, st.k.data()}, {&L.wv, st.v.data()}}, n);
    }
    {
      TraceScope ts(tr, "qk_norm_rope_kv", l);
      for (int i = 0; i < n; ++i) {
        float* q = &st.q[size_t(i) * QD];
        float* k = &st.k[size_t(i) * KD];
        float cs[kMaxRopeDims];
        rope_angles(c.n_rot, inv_freq, double(pos0 + i), cs);
        for (int h = 0; h < c.n_head; ++h) {
          rmsnorm_f32(q + h * HD, L.attn_q_norm, q + h * HD, HD, c.rms_eps);
          rope_apply(q + h * HD, c.n_rot, cs, /*neox=*/true);
        }
        for (int h = 0; h < c.n_head_kv; ++h) {
          rmsnorm_f32(k + h * HD, L.attn_k_norm, k + h * HD, HD, c.rms_eps);
          rope_apply(k + h * HD, c.n_rot, cs, /*neox=*/true);
        }
        st.kv.store(l, pos0 + i, k, &st.v[size_t(i) * KD]);
      }
    }
    {
      TraceScope ts(tr, "attention", l);
      // Local layers see the last sliding_window positions: the cache gives them their own
      // ring of that size (ForwardState passes ModelConfig::is_local_layer to the KvCache).
      attention(st, l, n, pos0, group, c.attn_scale, RopeSpec{inv_freq, c.n_rot, /*neox=*/true});
    }
    {
      TraceScope ts(tr, "attn_out", l);
      matmul(L.wo, st.att.data(), n, st.proj.data(), st.act_mode, st.mm, pool);
      for (int i = 0; i < n; ++i) {
        float* y = &st.proj[size_t(i) * E];
        rmsnorm_f32(y, L.post_attn_norm, y, E, c.rms_eps);
      }
      add_f32(st.x.data(), st.proj.data(), int64_t(n) * E);
    }

    // --- feed-forward block ---
    {
      TraceScope ts(tr, "ffn_norm", l);
      for (int i = 0; i < n; ++i) rmsnorm_f32(&st.x[size_t(i) * E], L.ffn_norm, &st.h[size_t(i) * E], E, c.rms_eps);
    }
    {
      TraceScope ts(tr, "gate_up", l);
      run_group(st, {{&L.w_gate, st.gate.data()}, {&L.w_up, st.up.data()}}, n);
    }
    {
      TraceScope ts(tr, "geglu", l);
      geglu_f32(st.gate.data(), st.up.data(), st.gate.data(), int64_t(n) * F);
    }
    {
      TraceScope ts(tr, "ffn_down", l);
      matmul(L.w_down, st.gate.data(), n, st.proj.data(), st.act_mode, st.mm, pool);
      for (int i = 0; i < n; ++i) {
        float* y = &st.proj[size_t(i) * E];
        rmsnorm_f32(y, L.post_ffn_norm, y, E, c.rms_eps);
      }
      add_f32(st.x.data(), st.proj.data(), int64_t(n) * E);
    }
  }

  if (!logits) return {};
  TraceScope ts(tr, "output_head");
  const int first = all_logits ? 0 : n - 1;
  const int n_out = n - first;
  for (int i = first; i < n; ++i)
    rmsnorm_f32(&st.x[size_t(i) * E], w.output_norm, &st.h[size_t(i - first) * E], E, c.rms_eps);
  matmul(w.output, st.h.data(), n_out, logits, st.act_mode, st.mm, pool);
  return {};
}

}  // namespace

const ArchDescriptor kArchGemma3 = {kArch, read_gemma3_config, load_gemma3_weights, gemma3_forward};

}  // namespace pllm
