// The CPU layer seam's ops of qwen35 (model/layer_ops.h): the gated attention's query/gate
// split and output gate, and the Gated DeltaNet layer, whose state lives in each sequence's
// cache (model/kv_cache.h: the convolution's rows and the delta-rule matrices).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_layers.h"
#include "base/trace.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"

namespace pllm {

namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x) without overflow; above 20 it is x to f32 precision (ggml's softplus cut-off).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x = silu(x) with the table's SwiGLU (silu(x) * 1).
void silu_in_place(const KernelTable& kt, float* x, int n) {
  static constexpr int kChunk = 256;
  static constexpr auto kOnes = [] {
    std::array<float, kChunk> a{};
    a.fill(1.0f);
    return a;
  }();
  for (int i = 0; i < n; i += kChunk) kt.swiglu_f32(x + i, kOnes.data(), x + i, std::min(kChunk, n - i));
}
}  // namespace

void CpuLayers::split_q_gate(int l, Act qg_act, Act q_act, Act gate_act) {
  TraceScope ts(opt_.tracer, "q_gate_split", l);
  const int QD = c_.q_dim(), HD = c_.head_dim;
  const float* qg = buf(qg_act);
  float* q = buf(q_act);
  float* g = buf(gate_act);
  for_rows([&](int64_t r) {
    const float* src = qg + size_t(r) * 2 * QD;
    for (int h = 0; h < c_.n_head; ++h) {
      std::memcpy(q + size_t(r) * QD + size_t(h) * HD, src + size_t(h) * 2 * HD, size_t(HD) * sizeof(float));
      std::memcpy(g + size_t(r) * QD + size_t(h) * HD, src + size_t(h) * 2 * HD + HD, size_t(HD) * sizeof(float));
    }
  });
}

void CpuLayers::sigmoid_gate(int l, Act x_act, Act gate_act) {
  TraceScope ts(opt_.tracer, "attn_gate", l);
  const size_t QD = size_t(c_.q_dim());
  float* x = buf(x_act);
  const float* g = buf(gate_act);
  for_rows([&](int64_t r) {
    for (size_t j = 0; j < QD; ++j) x[size_t(r) * QD + j] *= sigmoid(g[size_t(r) * QD + j]);
  });
}

void CpuLayers::delta_net(int l, const DeltaNetSpec& sp, Act qkv_act, Act z_act, Act beta_act, Act alpha_act,
                          Act conv_act, Act out_act) {
  TraceScope ts(opt_.tracer, "delta_net", l);
  const int CD = c_.dn_conv_dim(), HK = c_.dn_head, NK = c_.dn_k_heads, NV = c_.dn_v_heads;
  const int KD = c_.dn_key_dim(), VD = c_.dn_value_dim();
  const float* raw = buf(qkv_act);
  float* cv = buf(conv_act);
  const float* z = buf(z_act);
  float* beta = buf(beta_act);
  float* decay = buf(alpha_act);
  float* out = buf(out_act);
  const KernelTable& kt = kernels();

  // Per row and head (independent tasks, so a decode row's few heads spread over the threads):
  // the causal convolution of the head's channels of qkv, silu, the L2 norm of a q or k head; a
  // value head's task also computes its gates. Heads: q 0..NK-1, k NK..2NK-1, v 2NK..2NK+NV-1.
  const int n_heads = 2 * NK + NV;
  pool_.run_spread(int64_t(n_) * n_heads, [&](int64_t task) {
    const int64_t r = task / n_heads;
    const int h = int(task % n_heads);
    float* o = cv + size_t(r) * CD;
    const size_t j0 = size_t(h) * HK, j1 = j0 + size_t(HK);
    causal_conv_row(l, r, raw, size_t(CD), sp.conv_kernel, o, j0, j1);
    silu_in_place(kt, o + j0, HK);
    if (h < 2 * NK) {  // x / sqrt(sum x^2 + eps)
      float* x = o + j0;
      float ss = 0.0f;
      for (int i = 0; i < HK; ++i) ss += x[i] * x[i];
      const float inv = 1.0f / std::sqrt(ss + c_.rms_eps);
      for (int i = 0; i < HK; ++i) x[i] *= inv;
    } else {
      const int v = h - 2 * NK;
      float& b = beta[size_t(r) * NV + v];
      float& a = decay[size_t(r) * NV + v];
      b = sigmoid(b);
      a = std::exp(softplus(a + sp.dt[v]) * sp.a[v]);
    }
  });
  // A sequence whose rows reach a checkpoint boundary (position ckpt - 1, the last one in the
  // step) leaves the conv rows before it beside the checkpoint, from its step rows or, before
  // them, from the ring (not yet overwritten by this step).
  for (int i = 0, r0 = 0; i < int(seqs_.size()); r0 += int(seqs_[size_t(i)].tokens.size()), ++i) {
    const int nr = int(seqs_[size_t(i)].tokens.size());
    const int pos0 = s_.row_pos[size_t(r0)], ckpt = (pos0 + nr) / KvCache::kDeltaCheckpoint * KvCache::kDeltaCheckpoint;
    if (nr == 0 || ckpt <= pos0) continue;
    KvCache* kv = s_.row_kv[size_t(r0)];
    for (int t = 0; t < c_.conv_taps - 1; ++t) {
      const int p = ckpt - (c_.conv_taps - 1) + t;
      float* dst = kv->delta_checkpoint_conv(l) + size_t(t) * size_t(CD);
      if (p < 0) {
        std::memset(dst, 0, size_t(CD) * sizeof(float));
      } else {
        const float* src = p >= pos0 ? raw + size_t(r0 + p - pos0) * size_t(CD) : kv->conv_row(l, p);
        std::memcpy(dst, src, size_t(CD) * sizeof(float));
      }
    }
  }
  keep_conv_rows(l, raw, size_t(CD));

  // The recurrence: one task per (sequence, value head), its rows in order over the
  // sequence's state, which starts from zeros at position 0. A row ending a checkpoint block
  // also leaves its state in the checkpoint. Then the head's output of each row:
  // rmsnorm(o) * norm * silu(z).
  const int n_seq = int(seqs_.size());
  int row0[64];  // a step holds few sequences; more run in groups below
  const float scale = 1.0f / std::sqrt(float(HK));
  const size_t SS = size_t(HK) * size_t(HK);
  for (int s0 = 0, first = 0; s0 < n_seq; s0 += 64) {
    const int n = std::min(64, n_seq - s0);
    for (int i = 0; i < n; ++i) {
      row0[i] = first;
      first += int(seqs_[size_t(s0 + i)].tokens.size());
    }
    pool_.run(int64_t(n) * NV, [&](int64_t task) {
      const int i = int(task / NV), h = int(task % NV);
      const int r0 = row0[i], nr = int(seqs_[size_t(s0 + i)].tokens.size());
      KvCache* kv = s_.row_kv[size_t(r0)];
      float* S = kv->delta_state(l) + size_t(h) * SS;
      if (s_.row_pos[size_t(r0)] == 0) std::memset(S, 0, SS * sizeof(float));
      const int kh = h % NK;
      for (int r = r0; r < r0 + nr; ++r) {
        const float* row = cv + size_t(r) * CD;
        float* o = out + size_t(r) * VD + size_t(h) * HK;
        kt.delta_rule_step(S, row + size_t(kh) * HK, row + KD + size_t(kh) * HK, row + 2 * KD + size_t(h) * HK,
                           decay[size_t(r) * NV + h], beta[size_t(r) * NV + h], scale, HK, o);
        if ((s_.row_pos[size_t(r)] + 1) % KvCache::kDeltaCheckpoint == 0)
          std::memcpy(kv->delta_checkpoint(l) + size_t(h) * SS, S, SS * sizeof(float));
        rmsnorm_f32(o, sp.norm, o, HK, c_.rms_eps);
        kt.swiglu_f32(z + size_t(r) * VD + size_t(h) * HK, o, o, HK);  // o * silu(z)
      }
    });
    for (int i = 0; i < n; ++i) {
      const int r0 = row0[i], nr = int(seqs_[size_t(s0 + i)].tokens.size());
      const int last = s_.row_pos[size_t(r0 + nr - 1)] + 1;
      const int ckpt = last / KvCache::kDeltaCheckpoint * KvCache::kDeltaCheckpoint;
      if (ckpt > s_.row_pos[size_t(r0)]) s_.row_kv[size_t(r0)]->set_delta_checkpoint(l, ckpt);
    }
  }
}

}  // namespace pllm
