// The layer seam: the operations a forward pass is made of, over one step's rows (one or
// more sequences, each row at its own position). Architecture files compose these through
// the shared blocks (model/blocks.h) and never touch activation memory: a backend owns it.
// The CPU backend (backends/cpu/cpu_layers.h) is the reference; a GPU backend implements
// the same interface over its own buffers, op by op.
#pragma once
#include <initializer_list>

#include "base/result.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace pllm {

// The named activations of a step, each [rows][width]: x residual stream [n_embd], h the
// normed input of a block [n_embd], q [q_dim], k and v [kv_dim], att attention output
// [q_dim], gate and up [n_ff of the layer], proj output of wo / w_down [n_embd], ple Gemma 4's
// per-layer inputs [n_layer * n_embd_per_layer]. A layer's q, k, v and att are its own width
// (ModelConfig::q_dim_at, kv_dim_at: Gemma 4's layers differ), rows packed at that stride.
enum class Act { x, h, q, k, v, att, gate, up, proj, ple };

// One product of a group sharing an input: out = in · Wᵀ.
struct Product {
  const Matrix* W;
  Act out;
};

enum class Glu { silu, gelu_tanh };  // SwiGLU (llama, qwen2) or GeGLU with tanh GELU (gemma)

// What happens to q and k between the projection and the cache.
struct QkvSpec {
  const float* bq = nullptr;  // biases [q_dim], [kv_dim], [kv_dim] (qwen2), or null
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // per-head RMSNorm weights [head_dim] (gemma3), or null
  const float* k_norm = nullptr;
  RopeSpec rope;
  bool v_norm = false;    // RMSNorm (no weight) of every value head (gemma4)
  bool store_kv = true;   // false: the layer reads another layer's keys and values (KV sharing):
                          // only q is prepared, nothing is stored
};

// Gemma 4's per-layer inputs (LayerOps::per_layer_inputs): per row and layer block of
// n_embd_per_layer, (rmsnorm(proj * proj_scale) * proj_norm + table[token] * tok_scale) * out_scale.
struct PerLayerInputSpec {
  const Matrix* table = nullptr;       // per_layer_token_embd [n_vocab x n_layer * n_embd_per_layer]
  const float* proj_norm = nullptr;    // [n_embd_per_layer]
  float proj_scale = 1.0f, tok_scale = 1.0f, out_scale = 1.0f;
};

// A Gated DeltaNet layer's 1-D weights (qwen35; LayerOps::delta_net).
struct DeltaNetSpec {
  const float* conv_kernel = nullptr;  // [dn_conv_dim][conv_taps]: tap conv_taps - 1 on the row itself
  const float* dt = nullptr;           // [dn_v_heads] ssm_dt.bias
  const float* a = nullptr;            // [dn_v_heads] ssm_a = -exp(A_log)
  const float* norm = nullptr;         // [dn_head] ssm_norm
};

// What becomes of the logits after the output product: z = softcap > 0 ? softcap *
// tanh(mul * z / softcap) : mul * z (granite's 1 / logit_scale; gemma2's final soft-capping).
struct HeadSpec {
  float mul = 1.0f;
  float softcap = 0.0f;
};

class LayerOps {
 public:
  virtual ~LayerOps() = default;
  // True when every sequence of the step was cancelled: the pass may stop early.
  virtual bool cancelled() const = 0;
  // Layer l is left out of this pass (a self-speculative draft, StepOptions::skip_layers).
  virtual bool skipped(int /*l*/) const { return false; }
  // x = table[token of row] * scale.
  virtual Result<void> embed(const Matrix& table, float scale) = 0;
  // dst = rmsnorm(src) * w per row of n_embd (dst may be src). name, layer: for traces.
  virtual void norm(const char* name, int layer, Act src, const float* w, Act dst) = 0;
  // Products sharing the input `in` (one fused job unless fusion is off). name: for traces.
  virtual void project(const char* name, int layer, std::initializer_list<Product> products, Act in) = 0;
  // Biases, per-head norms and RoPE at each row's position on q and k, then k and v into
  // the cache of each row's sequence at layer l.
  virtual void qkv_to_cache(int l, const QkvSpec& s) = 0;
  // att = attention of each row's query heads over what its position sees in its own
  // sequence's cache at layer l (the cache re-rotates sinks with `rope`).
  virtual void attend(int l, AttnScore score, const RopeSpec& rope) = 0;
  // A convolution layer (lfm2): out = c * conv(b * x), elementwise over [n_embd] rows, where
  // conv is the depthwise causal convolution with kernel [n_embd][conv_taps] over the
  // sequence's conv inputs b * x at the row's position and the conv_taps - 1 before it
  // (zeros before position 0; those of earlier steps from the sequence's cache at layer l,
  // which then keeps the step's own).
  virtual void short_conv(int l, const float* kernel, Act b, Act c, Act x, Act out) = 0;
  // Gated attention (qwen35): qg holds per row and head the query, then its gate ([2 q_dim],
  // head by head); q gets the queries and gate the gates ([q_dim] each).
  virtual void split_q_gate(int l, Act qg, Act q, Act gate) = 0;
  // x *= sigmoid(gate) over [q_dim] rows (the gated attention's output).
  virtual void sigmoid_gate(int l, Act x, Act gate) = 0;
  // A Gated DeltaNet layer (model/blocks.h: delta_net_block) over rows of qkv [dn_conv_dim],
  // z [dn_value_dim], beta and alpha [dn_v_heads] (the input projections): conv = silu(the
  // depthwise causal convolution over the row's qkv and the conv_taps - 1 before it, zeros
  // before 0, earlier steps' from the sequence's cache, which then keeps the step's); q, k
  // L2-normed per head; per value head j (key head j % dn_k_heads) the delta rule over the
  // sequence's state S [dn_head][dn_head] (the cache's; zeros at position 0), row by row:
  //   S *= exp(softplus(alpha + dt) * a);  S += k ((v - S^T k) * sigmoid(beta))^T;
  //   o = S^T q / sqrt(dn_head)
  // then out = rmsnorm(o) * norm * silu(z) per head ([dn_value_dim]). conv is scratch
  // ([dn_conv_dim] rows); beta and alpha are overwritten.
  virtual void delta_net(int l, const DeltaNetSpec& s, Act qkv, Act z, Act beta, Act alpha, Act conv, Act out) = 0;
  // Gemma 4's per-layer inputs: `ple` holds per row the projection of the scaled embedding
  // ([n_layer * n_embd_per_layer]); it becomes each layer's input as `s` says, the table's row of
  // the row's token read from the mapping (only the step's rows are touched).
  virtual Result<void> per_layer_inputs(const PerLayerInputSpec& s, Act ple) = 0;
  // dst = layer l's block of ple ([n_embd_per_layer] per row, packed).
  virtual void per_layer_input(int l, Act ple, Act dst) = 0;
  // a *= s over [n_embd] rows (Gemma 4's layer_output_scale on the residual stream).
  virtual void scale(int l, Act a, float s) = 0;
  // gate = act(gate) * up over the layer's n_ff columns.
  virtual void glu(int l, Glu kind, int n_ff) = 0;
  // x += y * scale with y = from + bias, or y = rmsnorm(from + bias) * post_norm when
  // post_norm is set (bias, post_norm: [n_embd] or null; scale: granite's residual_scale, else 1).
  virtual void residual(int l, Act from, const float* bias, const float* post_norm, float scale) = 0;
  // The logits of the rows that want them: out · (rmsnorm(x) * norm), then as `spec` says.
  virtual void head(const float* norm, const Matrix& out, const HeadSpec& spec) = 0;
};

}  // namespace pllm
