// The non-matmul ops of a step (vk_ops.h): one small shader each (shaders/*.comp), recorded
// as one dispatch. Shapes go in push constants whose layouts mirror the shaders' blocks.
//
// Limits the callers keep (the CPU cache has the same ones, KvCache::validate): head_dim <= 256
// (the attention shader's shared query and 4 output dims per invocation); kv_dim a multiple
// of 64 for q8 (whole scale groups, codes read four to a word) and even for f16 (two halves
// per word); view offsets multiples of minStorageBufferOffsetAlignment.
#include "backends/vulkan/vk_ops.h"

#include <algorithm>
#include <cstdint>

#include "vk_shaders.h"

namespace pllm::vk {
namespace {

// Workgroups for `items` work items of `per_group` each, capped at the dispatch limit every
// device has (65535 per dimension); the shaders stride over whatever is left.
uint32_t groups(int64_t items, int64_t per_group) {
  const int64_t g = (items + per_group - 1) / per_group;
  return uint32_t(std::clamp<int64_t>(g, 1, 65535));
}

struct RmsPush {
  int32_t n, width;
  float eps;
  int32_t has_w;
};
struct BiasPush {
  int32_t n, width;
};
struct ResidualPush {
  int32_t n, width;
  float eps;
  int32_t has_bias, has_norm;
};
struct RopePush {
  int32_t n, n_heads, head_dim, n_rot, neox;
};
struct GluPush {
  int32_t n, n_ff, gelu;
};
struct KvStorePush {
  int32_t fmt, pos0, n, kv_dim;
};
struct AttnPush {
  int32_t pos0, n, n_head, n_head_kv, head_dim, kv_dim;
  float scale;
  int32_t window;
};

bool empty(View v) { return v.buf == VK_NULL_HANDLE; }

}  // namespace

struct OpKernels::Impl {
  std::unique_ptr<Kernel> rmsnorm, add_bias, residual, rope, glu, kv_store;
  std::unique_ptr<Kernel> attention[3];  // by KvFormat
  // Bound where an optional input is absent (a binding cannot be left empty without the
  // nullDescriptor feature); the shaders never touch it then.
  Buffer dummy;
  View or_dummy(View v) const { return empty(v) ? view(dummy) : v; }
};

Result<std::unique_ptr<OpKernels>> OpKernels::create(Context& ctx) {
  std::unique_ptr<OpKernels> k(new OpKernels());
  k->impl_ = std::make_unique<Impl>();
  Impl& m = *k->impl_;
  PLLM_ASSIGN(m.rmsnorm, Kernel::create(ctx, "rmsnorm", spv::k_rmsnorm, 3, sizeof(RmsPush)));
  PLLM_ASSIGN(m.add_bias, Kernel::create(ctx, "add_bias", spv::k_add_bias, 2, sizeof(BiasPush)));
  PLLM_ASSIGN(m.residual, Kernel::create(ctx, "residual", spv::k_residual, 4, sizeof(ResidualPush)));
  PLLM_ASSIGN(m.rope, Kernel::create(ctx, "rope", spv::k_rope, 2, sizeof(RopePush)));
  PLLM_ASSIGN(m.glu, Kernel::create(ctx, "glu", spv::k_glu, 2, sizeof(GluPush)));
  PLLM_ASSIGN(m.kv_store, Kernel::create(ctx, "kv_store", spv::k_kv_store, 6, sizeof(KvStorePush)));
  for (uint32_t f = 0; f < 3; ++f) {  // specialisation constant 0: the KV format
    PLLM_ASSIGN(m.attention[f], Kernel::create(ctx, "attention", spv::k_attention, 6, sizeof(AttnPush), {f}));
  }
  PLLM_ASSIGN(m.dummy, ctx.buffer(256, Mem::device));
  return k;
}

OpKernels::~OpKernels() = default;

void OpKernels::rmsnorm(Recorder& rec, View in, View w, View out, int n, int width, float eps) const {
  const RmsPush p{n, width, eps, empty(w) ? 0 : 1};
  rec.dispatch(*impl_->rmsnorm, {in, impl_->or_dummy(w), out}, &p, groups(n, 1));
}

void OpKernels::add_bias(Recorder& rec, View x, View b, int n, int width) const {
  const BiasPush p{n, width};
  rec.dispatch(*impl_->add_bias, {x, b}, &p, groups(int64_t(n) * width, 256));
}

void OpKernels::residual(Recorder& rec, View x, View from, View bias, View post_norm, int n, int width,
                         float eps) const {
  const ResidualPush p{n, width, eps, empty(bias) ? 0 : 1, empty(post_norm) ? 0 : 1};
  rec.dispatch(*impl_->residual, {x, from, impl_->or_dummy(bias), impl_->or_dummy(post_norm)}, &p, groups(n, 1));
}

void OpKernels::rope(Recorder& rec, View x, View cs, int n, int n_heads, int head_dim, int n_rot, bool neox) const {
  const RopePush p{n, n_heads, head_dim, n_rot, neox ? 1 : 0};
  rec.dispatch(*impl_->rope, {x, cs}, &p, groups(int64_t(n) * n_heads * (n_rot / 2), 256));
}

void OpKernels::glu(Recorder& rec, View gate, View up, int n, int n_ff, bool gelu) const {
  const GluPush p{n, n_ff, gelu ? 1 : 0};
  rec.dispatch(*impl_->glu, {gate, up}, &p, groups(int64_t(n) * n_ff, 256));
}

void OpKernels::kv_store(Recorder& rec, View k, View v, const KvLayerViews& kv, KvFormat f, int pos0, int n,
                         int kv_dim) const {
  const KvStorePush p{int32_t(f), pos0, n, kv_dim};
  // Per workgroup: 64 channels (f32; q8: one scale group) or 64 channel pairs (f16).
  const int64_t per_group = f == KvFormat::f16 ? 128 : 64;
  const uint32_t gx = uint32_t((kv_dim + per_group - 1) / per_group);
  rec.dispatch(*impl_->kv_store, {k, v, kv.k, kv.v, impl_->or_dummy(kv.ks), impl_->or_dummy(kv.vs)}, &p, gx,
               uint32_t(n), 2);
}

void OpKernels::attention(Recorder& rec, View q, const KvLayerViews& kv, KvFormat f, View out, int pos0, int n,
                          int n_head, int n_head_kv, int head_dim, float scale, int window) const {
  const AttnPush p{pos0, n, n_head, n_head_kv, head_dim, n_head_kv * head_dim, scale, window};
  rec.dispatch(*impl_->attention[int(f)], {q, kv.k, kv.v, impl_->or_dummy(kv.ks), impl_->or_dummy(kv.vs), out}, &p,
               uint32_t(n_head), uint32_t(n));
}

}  // namespace pllm::vk
