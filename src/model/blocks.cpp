#include "model/blocks.h"

namespace pllm {

void attention_block(LayerOps& ops, int l, const LayerWeights& L, const AttnBlockSpec& s) {
  ops.norm("attn_norm", l, Act::x, L.attn_norm, Act::h);
  QkvSpec qkv{L.bq, L.bk, L.bv, L.attn_q_norm, L.attn_k_norm, s.rope};
  qkv.v_norm = s.v_norm;
  qkv.store_kv = s.own_kv;
  if (s.own_kv) {
    ops.project("qkv", l, {{&L.wq, Act::q}, {&L.wk, Act::k}, {&L.wv, Act::v}}, Act::h);
  } else {
    ops.project("q", l, {{&L.wq, Act::q}}, Act::h);
  }
  ops.qkv_to_cache(l, qkv);
  ops.attend(l, s.score, s.rope);
  ops.project("attn_out", l, {{&L.wo, Act::proj}}, Act::att);
  ops.residual(l, Act::proj, L.bo, L.post_attn_norm, s.residual_scale);
}

void ffn_block(LayerOps& ops, int l, const LayerWeights& L, int n_ff, Glu glu, float residual_scale) {
  ops.norm("ffn_norm", l, Act::x, L.ffn_norm, Act::h);
  ops.project("gate_up", l, {{&L.w_gate, Act::gate}, {&L.w_up, Act::up}}, Act::h);
  ops.glu(l, glu, n_ff);
  ops.project("ffn_down", l, {{&L.w_down, Act::proj}}, Act::gate);
  ops.residual(l, Act::proj, L.b_down, L.post_ffn_norm, residual_scale);
}

void short_conv_block(LayerOps& ops, int l, const LayerWeights& L) {
  ops.norm("attn_norm", l, Act::x, L.attn_norm, Act::h);
  ops.project("conv_in", l, {{&L.conv_b, Act::gate}, {&L.conv_c, Act::q}, {&L.conv_x, Act::up}}, Act::h);
  ops.short_conv(l, L.conv_kernel, Act::gate, Act::q, Act::up, Act::att);
  ops.project("conv_out", l, {{&L.conv_out, Act::proj}}, Act::att);
  ops.residual(l, Act::proj, nullptr, nullptr, 1.0f);
}

// The projections' outputs go where the scratch is wide enough (backends/cpu/step_scratch.cpp):
// the [2 q_dim] query-and-gate rows in gate, the gates then in up.
void gated_attention_block(LayerOps& ops, int l, const LayerWeights& L, const AttnBlockSpec& s) {
  ops.norm("attn_norm", l, Act::x, L.attn_norm, Act::h);
  ops.project("qkv", l, {{&L.wq, Act::gate}, {&L.wk, Act::k}, {&L.wv, Act::v}}, Act::h);
  ops.split_q_gate(l, Act::gate, Act::q, Act::up);
  ops.qkv_to_cache(l, QkvSpec{nullptr, nullptr, nullptr, L.attn_q_norm, L.attn_k_norm, s.rope});
  ops.attend(l, s.score, s.rope);
  ops.sigmoid_gate(l, Act::att, Act::up);
  ops.project("attn_out", l, {{&L.wo, Act::proj}}, Act::att);
  ops.residual(l, Act::proj, nullptr, nullptr, 1.0f);
}

// qkv [dn_conv_dim] in gate, z in up, beta and alpha [dn_v_heads] in k and v, the convolution
// in q, the output [dn_value_dim] in att (the scratch sizes them: step_scratch.cpp).
void delta_net_block(LayerOps& ops, int l, const LayerWeights& L) {
  ops.norm("attn_norm", l, Act::x, L.attn_norm, Act::h);
  ops.project("dn_in", l, {{&L.dn_qkv, Act::gate}, {&L.dn_z, Act::up}, {&L.dn_beta, Act::k}, {&L.dn_alpha, Act::v}},
              Act::h);
  ops.delta_net(l, DeltaNetSpec{L.dn_conv, L.dn_dt, L.dn_a, L.dn_norm}, Act::gate, Act::up, Act::k, Act::v, Act::q,
                Act::att);
  ops.project("dn_out", l, {{&L.dn_out, Act::proj}}, Act::att);
  ops.residual(l, Act::proj, nullptr, nullptr, 1.0f);
}

RopeSpec layer_rope(const ModelConfig& c, const ModelWeights& w, int l) {
  RopeSpec r{w.rope_inv_freq.data(), c.has_rope(l) ? c.n_rot : 0, c.rope_order == RopeOrder::neox};
  r.mscale = c.rope_attn_factor;
  if (!w.rope_inv_freq_long.empty()) {
    r.inv_freq_long = w.rope_inv_freq_long.data();
    r.long_above = c.rope_orig_ctx;
  }
  return r;
}

}  // namespace pllm
