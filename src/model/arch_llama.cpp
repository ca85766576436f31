// The llama-family transformer (llama, SmolLM2, TinyLlama, Llama 3.x; qwen2 reuses it):
//   x = embed(token)
//   per layer:  x += Wo · attention(rope(Wq·rmsnorm(x)), rope(Wk·…), Wv·…)
//               x += Wdown · (silu(Wgate·rmsnorm(x)) * (Wup·rmsnorm(x)))
//   logits = Wout · rmsnorm(x)
#include <algorithm>
#include <initializer_list>
#include <cmath>

#include "base/trace.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"
#include "model/arch.h"
#include "model/forward_state.h"
#include "model/matmul.h"
#include "model/model.h"

namespace pllm {
namespace {

Result<ModelConfig> read_llama_config(const GgufFile& f) { return read_llama_family_config(f, "llama"); }
Result<ModelConfig> read_deci_config(const GgufFile& f) { return read_llama_family_config(f, "deci"); }



}  // namespace

void run_group(ForwardState& st, std::initializer_list<MatmulTarget> targets, int n) {
  if (st.fuse) {
    matmul_group({targets.begin(), targets.size()}, st.h.data(), n, st.act_mode, st.mm, *st.pool);
  } else {
    for (const MatmulTarget& t : targets) matmul(*t.W, st.h.data(), n, t.Y, st.act_mode, st.mm, *st.pool);
  }
}

void attention(ForwardState& st, int l, int n, int pos0, int group, float scale, const RopeSpec& rope) {
  const int n_kv = st.kv_dim / st.head_dim, HD = st.head_dim, QD = n_kv * group * HD;
  // The query heads sharing a kv head go together, so each kv head is read once per query.
  // A single decoded token also splits the visible positions into slices so every thread
  // works on a long context; the slices' softmax states are merged afterwards.
  int n_parts = 1;
  if (n == 1) {
    const int visible = st.kv.n_visible(l, pos0), threads = st.pool->size();
    n_parts = std::clamp(visible / 512, 1, ForwardState::kMaxAttnParts);
    // Fewer kv heads than a multiple of the threads (SmolLM2: 3 on 2 threads) would leave
    // a thread idle for a whole head: split further while each part keeps >= 64 positions.
    while ((n_kv * n_parts) % threads != 0 && n_parts < ForwardState::kMaxAttnParts &&
           visible / (n_parts + 1) >= 64)
      ++n_parts;
  }
  if (n_parts == 1) {
    st.pool->run(int64_t(n) * n_kv, [&](int64_t task) {
      const int i = int(task / n_kv), g = int(task % n_kv);
      const size_t at = size_t(i) * QD + size_t(g) * group * HD;
      AttnAccum a[KvCache::kMaxGroup];
      for (int j = 0; j < group; ++j) attn_accum_init(a[j], HD);
      // Causal: the query at position pos0 + i sees what the cache keeps up to pos0 + i.
      st.kv.attend_part(l, pos0 + i, g, group, &st.q[at], scale, rope, 0, 1, a);
      for (int j = 0; j < group; ++j) attn_accum_finish(a[j], HD, &st.att[at + size_t(j) * HD]);
    });
    return;
  }
  AttnAccum* parts = st.attn_parts.data();  // [g][part][j]
  st.pool->run(int64_t(n_kv) * n_parts, [&](int64_t task) {
    const int g = int(task / n_parts), p = int(task % n_parts);
    AttnAccum* a = parts + (size_t(g) * n_parts + p) * group;
    for (int j = 0; j < group; ++j) attn_accum_init(a[j], HD);
    st.kv.attend_part(l, pos0, g, group, &st.q[size_t(g) * group * HD], scale, rope, p, n_parts, a);
  });
  for (int g = 0; g < n_kv; ++g)
    for (int j = 0; j < group; ++j) {
      AttnAccum& into = parts[size_t(g) * n_parts * group + j];
      for (int p = 1; p < n_parts; ++p) merge_accum(into, parts[(size_t(g) * n_parts + p) * group + j], HD);
      attn_accum_finish(into, HD, &st.att[(size_t(g) * group + j) * HD]);
    }
}

Result<void> llama_family_load_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w) {
  const TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb) return make_error(Status::bad_format, f.path() + ": missing tensor 'token_embd.weight'");
  if (emb->dims.size() != 2 || emb->dims[1] == 0 || emb->dims[1] > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": tensor 'token_embd.weight' has a bad shape");
  const int64_t n_vocab = int64_t(emb->dims[1]);
  PLLM_ASSIGN(w.token_embd, get_matrix(f, "token_embd.weight", n_vocab, c.n_embd));
  PLLM_ASSIGN(w.output_norm, get_vector(f, "output_norm.weight", c.n_embd));
  if (f.tensor("output.weight")) {
    PLLM_ASSIGN(w.output, get_matrix(f, "output.weight", n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;  // tied embeddings
  }
  w.layers.resize(size_t(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& L = w.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    PLLM_ASSIGN(L.attn_norm, get_vector(f, p + "attn_norm.weight", c.n_embd));
    PLLM_ASSIGN(L.wq, get_matrix(f, p + "attn_q.weight", c.q_dim(), c.n_embd));
    PLLM_ASSIGN(L.wk, get_matrix(f, p + "attn_k.weight", c.kv_dim(), c.n_embd));
    PLLM_ASSIGN(L.wv, get_matrix(f, p + "attn_v.weight", c.kv_dim(), c.n_embd));
    if (c.qkv_bias) {
      PLLM_ASSIGN(L.bq, get_vector(f, p + "attn_q.bias", c.q_dim()));
      PLLM_ASSIGN(L.bk, get_vector(f, p + "attn_k.bias", c.kv_dim()));
      PLLM_ASSIGN(L.bv, get_vector(f, p + "attn_v.bias", c.kv_dim()));
    }
    PLLM_ASSIGN(L.wo, get_matrix(f, p + "attn_output.weight", c.n_embd, c.q_dim()));
    PLLM_ASSIGN(L.ffn_norm, get_vector(f, p + "ffn_norm.weight", c.n_embd));
    PLLM_ASSIGN(L.w_gate, get_matrix(f, p + "ffn_gate.weight", c.n_ff_at(i), c.n_embd));
    PLLM_ASSIGN(L.w_up, get_matrix(f, p + "ffn_up.weight", c.n_ff_at(i), c.n_embd));
    PLLM_ASSIGN(L.w_down, get_matrix(f, p + "ffn_down.weight", c.n_embd, c.n_ff_at(i)));
  }
  // RoPE frequencies; Llama 3.x stores per-frequency divisors in rope_freqs.weight.
  const int half = c.n_rot / 2;
  const float* factors = nullptr;
  if (f.tensor("rope_freqs.weight")) {
    PLLM_ASSIGN(factors, get_vector(f, "rope_freqs.weight", half));
  }
  w.rope_inv_freq.resize(size_t(half));
  for (int i = 0; i < half; ++i) {
    double inv = std::pow(double(c.rope_base), -2.0 * i / double(c.n_rot));
    if (factors) inv /= double(factors[i]);
    w.rope_inv_freq[size_t(i)] = float(inv / double(c.rope_linear_scale));
  }
  return {};
}

Result<void> llama_family_forward(const Model& m, ForwardState& st, const int32_t* tokens, int n, int pos0,
                                  float* logits, bool all_logits) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const KernelTable& kt = kernels();
  ThreadPool& pool = *st.pool;
  const int E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim(), HD = c.head_dim;
  const int group = c.n_head / c.n_head_kv;
  const bool neox = c.rope_order == RopeOrder::neox;
  const float scale = 1.0f / std::sqrt(float(HD));

  Tracer* tr = st.tracer;
  {
    TraceScope ts(tr, "embed");
    for (int i = 0; i < n; ++i) {
      const int32_t id = tokens[i];
      if (id < 0 || id >= w.token_embd.rows)
        return make_error(Status::invalid_argument, "token id " + std::to_string(id) + " is out of range");
      alignas(64) uint8_t buf[kMaxPanelRowBytes];
      kt.for_type(w.token_embd.type).dequantize_row(file_row(w.token_embd, id, buf), st.x.data() + size_t(i) * E, E);
    }
  }

  for (int l = 0; l < c.n_layer; ++l) {
    if (st.cancel && st.cancel->load(std::memory_order_relaxed))
      return make_error(Status::cancelled, "cancelled");
    const LayerWeights& L = w.layers[size_t(l)];
    const int F = c.n_ff_at(l);  // this layer's feed-forward size (pruned models differ per layer)

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
      TraceScope ts(tr, "bias_rope_kv", l);
      for (int i = 0; i < n; ++i) {
        float* q = &st.q[size_t(i) * QD];
        float* k = &st.k[size_t(i) * KD];
        float* v = &st.v[size_t(i) * KD];
        if (L.bq) {
          add_f32(q, L.bq, QD);
          add_f32(k, L.bk, KD);
          add_f32(v, L.bv, KD);
        }
        float cs[kMaxRopeDims];
        rope_angles(c.n_rot, w.rope_inv_freq.data(), double(pos0 + i), cs);
        for (int h = 0; h < c.n_head; ++h) rope_apply(q + h * HD, c.n_rot, cs, neox);
        for (int h = 0; h < c.n_head_kv; ++h) rope_apply(k + h * HD, c.n_rot, cs, neox);
        st.kv.store(l, pos0 + i, k, v);
      }
    }
    {
      TraceScope ts(tr, "attention", l);
      const RopeSpec rope{w.rope_inv_freq.data(), c.n_rot, neox};
      attention(st, l, n, pos0, group, scale, rope);
    }
    {
      TraceScope ts(tr, "attn_out", l);
      matmul(L.wo, st.att.data(), n, st.proj.data(), st.act_mode, st.mm, pool);
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
      TraceScope ts(tr, "swiglu", l);
      kt.swiglu_f32(st.gate.data(), st.up.data(), st.gate.data(), int64_t(n) * F);
    }
    {
      TraceScope ts(tr, "ffn_down", l);
      matmul(L.w_down, st.gate.data(), n, st.proj.data(), st.act_mode, st.mm, pool);
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

const ArchDescriptor kArchLlama = {"llama", read_llama_config, llama_family_load_weights,
                                   llama_family_forward};
const ArchDescriptor kArchDeci = {"deci", read_deci_config, llama_family_load_weights, llama_family_forward};

}  // namespace pllm
