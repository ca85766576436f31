#include "model/forward_state.h"

#include <algorithm>

#include "model/matmul.h"

namespace pllm {
namespace {

// Per layer: its own sliding window (Gemma 3's local layers), 0 for full attention.
std::vector<int> layer_windows(const ModelConfig& c) {
  std::vector<int> w(size_t(c.n_layer), 0);
  for (int l = 0; l < c.n_layer; ++l)
    if (c.is_local_layer(l)) w[size_t(l)] = c.sliding_window;
  return w;
}

}  // namespace

ForwardState::ForwardState(const ModelConfig& c, int n_ctx_, int n_batch_, ThreadPool& pool_, ActMode act_mode_,
                           const KvOptions& kv_options)
    : n_ctx(n_ctx_),
      n_batch(n_batch_),
      kv_dim(c.kv_dim()),
      head_dim(c.head_dim),
      pool(&pool_),
      act_mode(act_mode_),
      kv(c, kv_options, n_ctx_, n_batch_, layer_windows(c)) {
  const size_t B = size_t(n_batch);
  attn_parts.resize(size_t(c.n_head) * kMaxAttnParts);
  x.resize(B * c.n_embd);
  h.resize(B * std::max(c.n_embd, 1));
  q.resize(B * c.q_dim());
  k.resize(B * kv_dim);
  v.resize(B * kv_dim);
  att.resize(B * c.q_dim());
  gate.resize(B * c.n_ff);
  up.resize(B * c.n_ff);
  proj.resize(B * c.n_embd);
  const int widest = std::max({c.n_embd, c.n_ff, c.q_dim()});
  mm.act_row_stride = max_act_row_bytes(widest);
  act_q.resize(size_t(kMaxActFormats) * B * mm.act_row_stride);
  mm.n_batch = n_batch;
  mm.act_q = act_q.data();

}

}  // namespace pllm
