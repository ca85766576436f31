#include "backends/cpu/step_scratch.h"

#include <algorithm>

namespace pllm {

void StepScratch::reserve(const ModelConfig& c, int rows, int gathered, int threads) {
  // A convolution layer (model/blocks.h: short_conv_block) holds b, c, x and its output in
  // gate, q, up and att: [n_embd] each. A DeltaNet layer (delta_net_block) holds qkv in gate and
  // its convolution in q [dn_conv_dim], z in up and its output in att [dn_value_dim], beta and
  // alpha in k and v [dn_v_heads]; a gated attention layer its [2 q_dim] query-and-gate rows in gate.
  const int conv = c.conv_taps > 0 ? c.conv_row_dim() : 0;
  const int want_q = std::max({c.q_dim(), conv, c.dn_value_dim()});
  // Gemma 4's per-layer input block of a layer goes through gate and up ([n_embd_per_layer]).
  const int want_ff = std::max({c.n_ff, conv, c.dn_value_dim(), c.attn_out_gate ? 2 * c.q_dim() : 0,
                                c.n_embd_per_layer});
  const int want_kv = std::max(c.kv_dim(), c.dn_v_heads);
  const int want_ple = c.n_layer * c.n_embd_per_layer;
  const bool fits = rows <= rows_cap && c.n_embd <= n_embd && want_q <= q_dim && want_kv <= kv_dim &&
                    want_ff <= n_ff && c.n_head <= n_head && want_ple <= ple_dim;
  if (!fits) {
    rows_cap = std::max(rows, rows_cap);
    n_embd = std::max(n_embd, c.n_embd);
    q_dim = std::max(q_dim, want_q);
    kv_dim = std::max(kv_dim, want_kv);
    n_ff = std::max(n_ff, want_ff);
    n_head = std::max(n_head, c.n_head);
    ple_dim = std::max(ple_dim, want_ple);
    const size_t R = size_t(rows_cap);
    x.resize(R * n_embd);
    h.resize(R * std::max(n_embd, 1));
    q.resize(R * q_dim);
    k.resize(R * kv_dim);
    v.resize(R * kv_dim);
    att.resize(R * q_dim);
    gate.resize(R * n_ff);
    up.resize(R * n_ff);
    proj.resize(R * n_embd);
    if (ple_dim > 0) ple.resize(R * size_t(ple_dim));
    const int widest = std::max({n_embd, n_ff, q_dim});
    mm.act_row_stride = max_act_row_bytes(widest);
    act_q.resize(size_t(kMaxActFormats) * R * mm.act_row_stride);
    mm.n_batch = rows_cap;
    mm.act_q = act_q.data();
    row_kv.resize(R);
    row_pos.resize(R);
    row_token.resize(R);
    out_rows.resize(R);
    row_decode.resize(R);
    row_last.resize(R);
    row_embd.resize(R);
    attn_tiles.resize(R);
    attn_tile_end.resize(R);
    split_row.resize(R);
    split_parts.resize(R);
    split_first.resize(R + 1);
  }
  if (gathered > out_cap || c.n_vocab > n_vocab) {
    out_cap = std::max(out_cap, gathered);
    n_vocab = std::max(n_vocab, c.n_vocab);
    logits.resize(size_t(out_cap) * size_t(n_vocab), /*zero=*/false);
  }
  if (threads > threads_cap) {
    // Untouched until a product unpacks panels, so a model without panels costs no memory.
    threads_cap = threads;
    unpack_tiles.resize(size_t(threads_cap) * kUnpackTileBytes, /*zero=*/false);
    mm.unpack_tiles = unpack_tiles.data();
    mm.n_unpack_tiles = threads_cap;
  }
}

}  // namespace pllm
