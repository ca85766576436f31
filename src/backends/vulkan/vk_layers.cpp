#include "backends/vulkan/vk_layers.h"

#include <algorithm>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/ops_f32.h"

namespace pllm::vk {

VulkanLayers::VulkanLayers(Backend& b, const ModelConfig& c, std::span<const SeqStep> seqs,
                           std::span<const StepRow> rows, std::span<const int> seq_row0, std::span<const int> out_rows,
                           bool int8)
    : b_(b), c_(c), seqs_(seqs), rows_(rows), seq_row0_(seq_row0), out_rows_(out_rows), int8_(int8) {
  for (int l = 0; l < c.n_layer; ++l) ff_ = std::max(ff_, c.n_ff_at(l));
}

bool VulkanLayers::cancelled() const {
  return std::all_of(seqs_.begin(), seqs_.end(), [](const SeqStep& q) { return q.cancelled(); });
}

int VulkanLayers::width(Act a) const {
  switch (a) {
    case Act::x:
    case Act::h:
    case Act::proj: return c_.n_embd;
    case Act::q:
    case Act::att: return c_.q_dim();
    case Act::k:
    case Act::v: return c_.kv_dim();
    case Act::gate:
    case Act::up: return ff_;
    case Act::ple: return c_.n_embd;  // never bound (act)
  }
  return 0;
}

View VulkanLayers::act(Act a, int row0, int n) const {
  const StepBuffers& s = b_.bufs;
  const Buffer* buf = nullptr;
  switch (a) {
    case Act::x: buf = &s.x; break;
    case Act::h: buf = &s.h; break;
    case Act::q: buf = &s.q; break;
    case Act::k: buf = &s.k; break;
    case Act::v: buf = &s.v; break;
    case Act::att: buf = &s.att; break;
    case Act::gate: buf = &s.gate; break;
    case Act::up: buf = &s.up; break;
    case Act::proj: buf = &s.proj; break;
    case Act::ple: buf = &s.proj; break;  // never bound: project and the per-layer ops refuse it
  }
  if (n < 0) n = int(rows_.size()) - row0;
  const uint64_t w = uint64_t(width(a)) * 4;
  return View{buf->handle(), uint64_t(row0) * w, uint64_t(n) * w};
}

View VulkanLayers::weight_vector(const float* p, int n) {
  if (!p) return View{};
  auto v = b_.weights->vector(p, n);
  if (!v.ok()) {
    fail(v.error());
    return View{};
  }
  return *v;
}

// RoPE angles come from the host, computed exactly as the CPU does (rope_angles, in double),
// so the device rotates by the same cos/sin: a step needs one table per RoPE base in use.
View VulkanLayers::rope_table(const float* inv_freq, int n_rot) {
  const uint64_t table = uint64_t(b_.bufs.rows) * uint64_t(n_rot) * 4;
  for (int t = 0; t < 2; ++t) {
    if (cs_keys_[t] == inv_freq) return View{b_.bufs.cs.handle(), uint64_t(t) * table, uint64_t(rows_.size()) * n_rot * 4};
    if (cs_keys_[t]) continue;
    cs_keys_[t] = inv_freq;
    float* cs = reinterpret_cast<float*>(static_cast<uint8_t*>(b_.bufs.cs.mapped()) + t * table);
    for (size_t r = 0; r < rows_.size(); ++r) rope_angles(n_rot, inv_freq, double(rows_[r].pos), cs + r * size_t(n_rot));
    return View{b_.bufs.cs.handle(), uint64_t(t) * table, uint64_t(rows_.size()) * n_rot * 4};
  }
  fail(make_error(Status::unsupported, "Vulkan: more than two RoPE tables in one step"));
  return View{};
}

Result<void> VulkanLayers::embed(const Matrix& table, float scale) {
  // The lookup runs on the host (a few rows of the table) and the rows go up with the step.
  const KernelTable& kt = kernels();
  const int E = c_.n_embd;
  float* x = static_cast<float*>(b_.bufs.x_in.mapped());
  for (size_t r = 0; r < rows_.size(); ++r) {
    float* xr = x + r * size_t(E);
    if (rows_[r].embd) {  // an image row: as it is (no scale)
      std::memcpy(xr, rows_[r].embd, size_t(E) * sizeof(float));
      continue;
    }
    const int32_t id = rows_[r].token;
    if (id < 0 || id >= table.rows)
      return make_error(Status::invalid_argument, "token id " + std::to_string(id) + " is out of range");
    alignas(64) uint8_t row[kMaxPanelRowBytes];
    kt.for_type(table.type).dequantize_row(file_row(table, id, row), xr, E);
    if (scale != 1.0f)
      for (int j = 0; j < E; ++j) xr[j] *= scale;
  }
  const uint64_t bytes = uint64_t(rows_.size()) * uint64_t(E) * 4;
  b_.rec->copy({b_.bufs.x_in.handle(), 0, bytes}, {b_.bufs.x.handle(), 0, bytes});
  return {};
}

void VulkanLayers::norm(const char*, int, Act src, const float* w, Act dst) {
  b_.ops->rmsnorm(*b_.rec, act(src), weight_vector(w, c_.n_embd), act(dst), int(rows_.size()), c_.n_embd, c_.rms_eps);
}

void VulkanLayers::project(const char*, int, std::initializer_list<Product> products, Act in) {
  for (const Product& p : products)
    if (p.out == Act::ple || in == Act::ple) return fail(make_error(Status::unsupported, "per-layer inputs are not on the device"));
  for (const Product& p : products) {
    auto W = b_.weights->matrix(*p.W);
    if (!W.ok()) return fail(W.error());
    // Y's row stride is W.rows: the products of a layer fill their activation's first W.rows
    // columns (n_ff of a pruned layer may be below the widest layer's).
    const int n = int(rows_.size());
    const View X{act(in).buf, 0, uint64_t(n) * uint64_t(p.W->cols) * 4};
    const View Y{act(p.out).buf, 0, uint64_t(n) * uint64_t(p.W->rows) * 4};
    if (auto r = b_.mm->record(*b_.rec, *W, X, Y, n, int8_); !r.ok()) return fail(r.error());
  }
}

void VulkanLayers::qkv_to_cache(int l, const QkvSpec& sp) {
  const int n = int(rows_.size()), QD = c_.q_dim(), KD = c_.kv_dim(), HD = c_.head_dim;
  const OpKernels& ops = *b_.ops;
  Recorder& rec = *b_.rec;
  if (sp.bq) {
    ops.add_bias(rec, act(Act::q), weight_vector(sp.bq, QD), n, QD);
    ops.add_bias(rec, act(Act::k), weight_vector(sp.bk, KD), n, KD);
    ops.add_bias(rec, act(Act::v), weight_vector(sp.bv, KD), n, KD);
  }
  if (sp.q_norm) ops.rmsnorm(rec, act(Act::q), weight_vector(sp.q_norm, HD), act(Act::q), n * c_.n_head, HD, c_.rms_eps);
  if (sp.k_norm)
    ops.rmsnorm(rec, act(Act::k), weight_vector(sp.k_norm, HD), act(Act::k), n * c_.n_head_kv, HD, c_.rms_eps);
  if (sp.rope.mscale != 1.0f || sp.rope.inv_freq_long || sp.rope.n_rot != HD)
    return fail(make_error(Status::unsupported, "Vulkan: LongRoPE, partial or no RoPE"));
  const View cs = rope_table(sp.rope.inv_freq, sp.rope.n_rot);
  if (!err_.ok()) return;
  ops.rope(rec, act(Act::q), cs, n, c_.n_head, HD, sp.rope.n_rot, sp.rope.neox);
  ops.rope(rec, act(Act::k), cs, n, c_.n_head_kv, HD, sp.rope.n_rot, sp.rope.neox);
  // Into each sequence's mirror, and out to the host for the CPU cache (written after the step).
  for (size_t s = 0; s < seqs_.size(); ++s) {
    const SeqStep& q = seqs_[s];
    const int r0 = seq_row0_[s], ns = int(q.tokens.size());
    const KvMirror& m = b_.mirrors.at(q.kv);
    ops.kv_store(rec, act(Act::k, r0, ns), act(Act::v, r0, ns), m.layers[size_t(l)].views, m.format,
                 rows_[size_t(r0)].pos, ns, KD);
  }
  const uint64_t bytes = uint64_t(n) * uint64_t(KD) * 4, layer = 2 * uint64_t(b_.bufs.rows) * uint64_t(KD) * 4;
  rec.copy({b_.bufs.k.handle(), 0, bytes}, {b_.bufs.kv_out.handle(), uint64_t(l) * layer, bytes});
  rec.copy({b_.bufs.v.handle(), 0, bytes}, {b_.bufs.kv_out.handle(), uint64_t(l) * layer + layer / 2, bytes});
}

void VulkanLayers::attend(int l, AttnScore score, const RopeSpec&) {
  if (score.softcap > 0.0f) return fail(make_error(Status::unsupported, "Vulkan: attention soft-capping"));
  const float scale = score.scale;
  for (size_t s = 0; s < seqs_.size(); ++s) {
    const SeqStep& q = seqs_[s];
    const int r0 = seq_row0_[s], ns = int(q.tokens.size());
    const KvMirror& m = b_.mirrors.at(q.kv);
    b_.ops->attention(*b_.rec, act(Act::q, r0, ns), m.layers[size_t(l)].views, m.format, act(Act::att, r0, ns),
                      rows_[size_t(r0)].pos, ns, c_.n_head, c_.n_head_kv, c_.head_dim, scale, q.kv->layer_window(l));
  }
}

void VulkanLayers::short_conv(int, const float*, Act, Act, Act, Act) {
  fail(make_error(Status::unsupported, "convolution layers are not on the device"));
}

// qwen35: unsupported_reason (vk_backend.cpp) keeps it on the CPU; these are the safety net.
void VulkanLayers::split_q_gate(int, Act, Act, Act) {
  fail(make_error(Status::unsupported, "gated attention is not on the device"));
}

void VulkanLayers::sigmoid_gate(int, Act, Act) {
  fail(make_error(Status::unsupported, "gated attention is not on the device"));
}

void VulkanLayers::delta_net(int, const DeltaNetSpec&, Act, Act, Act, Act, Act, Act) {
  fail(make_error(Status::unsupported, "DeltaNet layers are not on the device"));
}

// gemma4: unsupported_reason (vk_backend.cpp) keeps it on the CPU; these are the safety net.
Result<void> VulkanLayers::per_layer_inputs(const PerLayerInputSpec&, Act) {
  fail(make_error(Status::unsupported, "per-layer inputs are not on the device"));
  return {};
}

void VulkanLayers::per_layer_input(int, Act, Act) {
  fail(make_error(Status::unsupported, "per-layer inputs are not on the device"));
}

void VulkanLayers::scale(int, Act, float) { fail(make_error(Status::unsupported, "layer output scales are not on the device")); }

void VulkanLayers::glu(int, Glu kind, int n_ff) {
  // gate and up hold n_ff columns per row (the products' row stride).
  const int n = int(rows_.size());
  const uint64_t bytes = uint64_t(n) * uint64_t(n_ff) * 4;
  b_.ops->glu(*b_.rec, View{b_.bufs.gate.handle(), 0, bytes}, View{b_.bufs.up.handle(), 0, bytes}, n, n_ff,
              kind == Glu::gelu_tanh);
}

void VulkanLayers::residual(int, Act from, const float* bias, const float* post_norm, float scale) {
  // unsupported_reason (vk_backend.cpp) keeps such models on the CPU; this is the safety net.
  if (scale != 1.0f) return fail(make_error(Status::unsupported, "Vulkan: residual scaling"));
  b_.ops->residual(*b_.rec, act(Act::x), act(from), weight_vector(bias, c_.n_embd), weight_vector(post_norm, c_.n_embd),
                   int(rows_.size()), c_.n_embd, c_.rms_eps);
}

void VulkanLayers::head(const float* norm, const Matrix& out, const HeadSpec& spec) {
  if (spec.mul != 1.0f || spec.softcap > 0.0f) return fail(make_error(Status::unsupported, "Vulkan: logit scaling"));
  const int n_out = int(out_rows_.size());
  if (n_out == 0) return;
  const uint64_t row = uint64_t(c_.n_embd) * 4;
  for (int i = 0; i < n_out; ++i)
    b_.rec->copy({b_.bufs.x.handle(), uint64_t(out_rows_[size_t(i)]) * row, row},
                 {b_.bufs.sel.handle(), uint64_t(i) * row, row});
  const View sel{b_.bufs.sel.handle(), 0, uint64_t(n_out) * row};
  b_.ops->rmsnorm(*b_.rec, sel, weight_vector(norm, c_.n_embd), sel, n_out, c_.n_embd, c_.rms_eps);
  auto W = b_.weights->matrix(out);
  if (!W.ok()) return fail(W.error());
  const View Y{b_.bufs.logits.handle(), 0, uint64_t(n_out) * uint64_t(out.rows) * 4};
  if (auto r = b_.mm->record(*b_.rec, *W, sel, Y, n_out, int8_); !r.ok()) fail(r.error());
}

}  // namespace pllm::vk
