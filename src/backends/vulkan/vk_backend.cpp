// VulkanBackend: one step = validate, sync each sequence's KV mirror, record the model's pass
// through VulkanLayers, submit, then write the new keys/values into the CPU caches and copy
// the logits out.
#include "backends/vulkan/vk_backend.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>

#include "backends/vulkan/vk_layers.h"
#include "backends/vulkan/vk_state.h"

namespace pllm {
namespace {

using namespace vk;

class VulkanBackendImpl final : public VulkanBackend {
 public:
  explicit VulkanBackendImpl(Backend b) : b_(std::move(b)) {}

  std::string describe() const override {
    const DeviceInfo& d = b_.ctx->info();
    std::string s = "Vulkan: " + d.name + " (" + d.type;
    if (b_.ctx->use_f16()) s += ", fp16";
    if (b_.ctx->use_int_dot()) s += ", int dot";
    return s + ")";
  }

  std::string unsupported_reason(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt) const override {
    if (b_.ctx->lost()) return "the Vulkan device was lost";
    // int16 activations take the device's float products (exact mode's): int16 is how the CPU
    // gets integer speed at near-exact rounding, and the device's float path is exact itself.
    if (opt.act_mode != ActMode::exact && opt.act_mode != ActMode::int8 && opt.act_mode != ActMode::int16)
      return "the Vulkan backend runs exact, int16 or int8 activations only";
    if (opt.observer) return "calibration observers run on the CPU";
    if (!opt.skip_layers.empty()) return "layer-skipping drafts (self-speculation) run on the CPU";
    const ModelConfig& c = m.config();
    if (std::string f = unmirrored_feature(m); !f.empty()) return f;
    if (c.head_dim > 256) return "head_dim > 256";
    if (std::string t = unsupported_weight(m); !t.empty()) return t;
    for (const SeqStep& q : seqs) {
      // The device's attention and products sum in their own order: a verify pass's rows
      // would not be the CPU's (or the device's) one-row steps bit for bit.
      if (q.as_decode_steps && q.tokens.size() > 1) return "speculative verify passes run on the CPU";
      // Image rows' embeddings go up like looked-up rows; the shaders' mask is causal.
      if (q.bidirectional) return "image rows that see each other both ways (gemma3) run on the CPU";
      if (!q.kv) continue;
      KvFormat f;
      if (!kv_format_of(q.kv->type(), &f)) return "q4 KV caches are not mirrored on the device";
      if (q.kv->unbounded()) return "a session-wide sliding window is not mirrored on the device";
      for (int l = 0; l < q.kv->n_layer(); ++l)
        if (q.kv->layer_sinks(l) > 0) return "attention sinks are not mirrored on the device";
      auto it = b_.mirrors.find(q.kv);
      const bool fresh = it == b_.mirrors.end() || it->second.stamp != q.kv->stamp() || it->second.end != q.kv->end();
      if (fresh && q.kv->end() > 0 && !q.kv->prefix_bytes(q.kv->end()).ok())
        return "the device's copy of this sequence's KV cache is stale and the cache cannot be exported";
    }
    // Each sequence's rows are bound at an offset of whole q / kv rows.
    const uint64_t align = std::max<uint64_t>(4, b_.ctx->info().storage_align);
    if (seqs.size() > 1 && ((uint64_t(c.q_dim()) * 4) % align || (uint64_t(c.kv_dim()) * 4) % align))
      return "several sequences need q/kv row offsets the device can bind";
    return "";
  }

  Result<void> forward(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.vocab_only()) return make_error(Status::invalid_argument, "model was loaded vocab-only");
    PLLM_TRY(check_step(seqs));
    if (std::string why = unsupported_reason(m, seqs, opt); !why.empty()) return make_error(Status::unsupported, why);
    const ModelConfig& c = m.config();
    if (model_ != &m) {  // another model: its weights replace the old ones
      b_.weights->clear();
      b_.mirrors.clear();
      model_ = &m;
    }
    rows_.clear();
    out_rows_.clear();
    seq_row0_.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const SeqStep& q = seqs[i];
      const int64_t pos0 = q.kv->end(), n = int64_t(q.tokens.size());
      seq_row0_.push_back(int(rows_.size()));
      for (int64_t t = 0; t < n; ++t) {
        if (q.logits && (q.all_logits || t == n - 1)) out_rows_.push_back(int(rows_.size()));
        rows_.push_back({int(i), int(pos0 + t), q.tokens[size_t(t)],
                         q.embeddings ? q.embeddings + size_t(t) * size_t(c.n_embd) : nullptr});
      }
    }
    const int n_vocab = int(m.weights().output.rows);
    PLLM_TRY(b_.bufs.reserve(*b_.ctx, c, n_vocab, int(rows_.size()), int(out_rows_.size())));
    PLLM_TRY(b_.rec->begin());
    for (const SeqStep& q : seqs) PLLM_TRY(sync_mirror(c, *q.kv, int(q.tokens.size())));
    vk::VulkanLayers ops(b_, c, seqs, rows_, seq_row0_, out_rows_, opt.act_mode == ActMode::int8);
    Result<void> pass = m.run_layers(ops);
    if (pass.ok()) pass = ops.error();
    if (pass.ok()) pass = b_.rec->submit();
    b_.retired.clear();
    if (!pass.ok()) return pass;
    return write_back(c, seqs, n_vocab);
  }

  void forget(const KvCache* kv) override {
    std::lock_guard<std::mutex> lock(mu_);
    b_.mirrors.erase(kv);
  }
  bool lost() const override { return b_.ctx->lost(); }
  int validation_messages() const override {
    return b_.ctx->validation_enabled() ? b_.ctx->validation_messages() : -1;
  }

 private:
  // What the device graph does not compute yet (these models run on the CPU), as a reason.
  static std::string unmirrored_feature(const Model& m) {
    const ModelConfig& c = m.config();
    if (!c.head_dim_layer.empty() || !c.kv_source.empty() || c.n_embd_per_layer > 0)
      return c.arch + "'s per-layer head sizes, shared KV layers and per-layer inputs are not on the device";
    if (c.residual_scale != 1.0f || c.logit_mul != 1.0f) return c.arch + "'s residual and logit scales are not on the device";
    if (c.rope_off || c.no_rope_step > 0) return c.arch + "'s layers without RoPE are not on the device";
    if (c.n_rot != c.head_dim) return "partial RoPE (rope.dimension_count < head size) is not on the device";
    if (c.rope_attn_factor != 1.0f || !m.weights().rope_inv_freq_long.empty()) return "LongRoPE is not on the device";
    if (c.attn_softcap > 0.0f || c.final_softcap > 0.0f) return c.arch + "'s soft-capping is not on the device";
    if (c.conv_taps > 0) return c.arch + "'s convolution layers are not on the device";
    return "";
  }

  // The first weight without a device matmul, as a reason; "" when all have one.
  static std::string unsupported_weight(const Model& m) {
    const ModelWeights& w = m.weights();
    auto check = [](const Matrix& x) {
      return matmul_supported(x.type) ? std::string()
                                      : std::string(x.name) + " is " + type_traits(uint32_t(x.type))->name +
                                            ", which has no device matmul";
    };
    std::string why = check(w.output);
    for (const LayerWeights& L : w.layers)
      for (const Matrix* x : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
        if (why.empty()) why = check(*x);
    return why;
  }

  // Makes the sequence's mirror exact for positions < kv.end() and large enough for n more.
  Result<void> sync_mirror(const ModelConfig& c, const KvCache& kv, int n) {
    KvFormat f;
    kv_format_of(kv.type(), &f);
    auto it = b_.mirrors.find(&kv);
    const int need = kv.end() + n;
    const bool stale = it == b_.mirrors.end() || it->second.stamp != kv.stamp() || it->second.end != kv.end();
    if (it != b_.mirrors.end() && it->second.format != f) {
      b_.mirrors.erase(it);
      it = b_.mirrors.end();
    }
    if (it == b_.mirrors.end() || it->second.cap < need) {
      // Capacity grows in blocks of 256 positions, at least doubling, up to the context.
      const int old = it == b_.mirrors.end() ? 0 : it->second.cap;
      const int cap = std::min(kv.n_ctx(), std::max((need + 255) / 256 * 256, 2 * old));
      PLLM_ASSIGN(KvMirror grown, make_mirror(*b_.ctx, f, c.n_layer, c.kv_dim(), std::max(cap, need)));
      if (it != b_.mirrors.end() && !stale) {
        copy_mirror(*b_.rec, it->second, grown, it->second.end, c.kv_dim());
        grown.end = it->second.end;
        grown.stamp = it->second.stamp;
        b_.retired.push_back(std::move(it->second));
      }
      b_.mirrors[&kv] = std::move(grown);
      it = b_.mirrors.find(&kv);
    }
    if (stale) PLLM_TRY(upload_mirror(*b_.ctx, kv, it->second));
    return {};
  }

  // After a successful submit: the CPU caches take the new keys and values, the mirrors
  // record the caches' new stamps, the callers get their logits.
  Result<void> write_back(const ModelConfig& c, std::span<const SeqStep> seqs, int n_vocab) {
    const size_t KD = size_t(c.kv_dim()), layer = 2 * size_t(b_.bufs.rows) * KD;
    const float* kv_out = static_cast<const float*>(b_.bufs.kv_out.mapped());
    const float* logits = static_cast<const float*>(b_.bufs.logits.mapped());
    size_t r = 0, o = 0;
    for (const SeqStep& q : seqs) {
      const int pos0 = q.kv->end(), n = int(q.tokens.size());
      KvMirror& mirror = b_.mirrors.at(q.kv);
      if (auto bb = q.kv->begin_batch(pos0, n); !bb.ok()) {
        // Out of memory: the sequences already written back step back, so none moved.
        for (const SeqStep* p = seqs.data(); p != &q; ++p) {
          p->kv->truncate(p->kv->end() - int(p->tokens.size()));
          b_.mirrors.erase(p->kv);
        }
        b_.mirrors.erase(q.kv);
        return bb;
      }
      for (int l = 0; l < c.n_layer; ++l)
        for (int i = 0; i < n; ++i) {
          const float* k = kv_out + size_t(l) * layer + (r + size_t(i)) * KD;
          q.kv->store(l, pos0 + i, k, k + layer / 2);
        }
      mirror.end = pos0 + n;
      mirror.stamp = q.kv->stamp();
      if (q.logits) {
        const size_t rows = q.all_logits ? size_t(n) : 1;
        std::memcpy(q.logits, logits + o * size_t(n_vocab), rows * size_t(n_vocab) * 4);
        o += rows;
      }
      r += size_t(n);
    }
    return {};
  }

  std::mutex mu_;
  Backend b_;
  const Model* model_ = nullptr;
  std::vector<StepRow> rows_;
  std::vector<int> seq_row0_;  // first row of each sequence
  std::vector<int> out_rows_;
};

}  // namespace

Result<std::unique_ptr<VulkanBackend>> VulkanBackend::create(const VulkanOptions& o) {
  ContextOptions co = ContextOptions::from_env();
  if (o.device >= 0 && co.device < 0) co.device = o.device;
  co.allow_cpu_device = co.allow_cpu_device || o.allow_cpu_device;
  Backend b;
  PLLM_ASSIGN(b.ctx, Context::create(co));
  PLLM_ASSIGN(b.rec, Recorder::create(*b.ctx));
  PLLM_ASSIGN(b.mm, MatmulKernels::create(*b.ctx));
  PLLM_ASSIGN(b.ops, OpKernels::create(*b.ctx));
  b.weights = std::make_unique<DeviceWeights>(*b.ctx);
  return std::unique_ptr<VulkanBackend>(new VulkanBackendImpl(std::move(b)));
}

bool vulkan_built() { return true; }

}  // namespace pllm
