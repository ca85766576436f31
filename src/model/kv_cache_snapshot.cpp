// KvCache prefix snapshots (declared in kv_cache.h): the raw slots of positions [0, n),
// copied in the cache's own storage format so a restored cache is bit-identical to the
// one that computed the prefix (no re-quantisation, no rounding).
#include <cstring>

#include "model/kv_cache.h"

namespace pllm {
namespace {
constexpr int G = kKvQ4GroupTokens;
}  // namespace

size_t KvCache::layer_prefix_bytes(int n) const {
  const size_t D = size_t(kv_dim_), N = size_t(n);
  switch (type_) {
    case KvType::f32: return 2 * N * D * 4;
    case KvType::f16: return 2 * N * D * 2;
    case KvType::q8: return 2 * N * D + 2 * N * (D / kKvQ8Group) * 4;
    case KvType::q4: return size_t(n / G) * group_bytes() + 2 * size_t(n % G) * D * 2;
  }
  return 0;
}

Result<size_t> KvCache::prefix_bytes(int n) const {
  for (const Layer& L : layers_)
    if (L.window > 0)
      return make_error(Status::unsupported, "KV snapshots need a cache without a sliding window");
  if (n < 0 || n > end_)
    return make_error(Status::out_of_range, "KV snapshot of " + std::to_string(n) + " positions, but the cache holds " +
                                                std::to_string(end_));
  // q4: the partial group at n is exported from its f16 rows, kept for the newest positions
  // (a group + a batch): the same rule as truncate().
  if (type_ == KvType::q4 && n % G != 0 && n / G * G < end_ - layers_.front().recent)
    return make_error(Status::invalid_argument, "a q4 KV snapshot must end on a group of " + std::to_string(G) +
                                                    " positions or inside a group whose f16 rows are still kept");
  return layer_prefix_bytes(n) * layers_.size();
}

Result<void> KvCache::export_prefix(int n, uint8_t* out) const {
  PLLM_TRY(prefix_bytes(n));
  const size_t D = size_t(kv_dim_), N = size_t(n);
  auto put = [&](size_t off, size_t bytes, const Layer& L) {
    std::memcpy(out, L.base + off, bytes);
    out += bytes;
  };
  for (const Layer& L : layers_) {
    switch (type_) {
      case KvType::f32:
        put(L.k, N * D * 4, L);
        put(L.v, N * D * 4, L);
        break;
      case KvType::f16:
        put(L.k, N * D * 2, L);
        put(L.v, N * D * 2, L);
        break;
      case KvType::q8:
        put(L.k, N * D, L);
        put(L.v, N * D, L);
        put(L.ks, N * (D / kKvQ8Group) * 4, L);
        put(L.vs, N * (D / kKvQ8Group) * 4, L);
        break;
      case KvType::q4: {  // no window: no sinks, group g sits in ring slot g; its f16 rows at g*G % recent
        const size_t row0 = size_t(n / G * G % L.recent) * D * 2;
        put(L.groups, size_t(n / G) * group_bytes(), L);
        put(L.tail_k + row0, size_t(n % G) * D * 2, L);
        put(L.tail_v + row0, size_t(n % G) * D * 2, L);
        break;
      }
    }
  }
  return {};
}

Result<void> KvCache::import_prefix(int n, const uint8_t* in, size_t len) {
  ++stamp_;
  for (const Layer& L : layers_)
    if (L.window > 0)
      return make_error(Status::unsupported, "KV snapshots need a cache without a sliding window");
  if (n < 0 || n > n_ctx_)
    return make_error(Status::out_of_range, "KV snapshot of " + std::to_string(n) +
                                                " positions does not fit the context of " + std::to_string(n_ctx_));
  if (len != layer_prefix_bytes(n) * layers_.size())
    return make_error(Status::bad_format, "KV snapshot payload has " + std::to_string(len) + " bytes, expected " +
                                              std::to_string(layer_prefix_bytes(n) * layers_.size()));
  PLLM_TRY(grow_to(n));  // before anything changes: a failure leaves the cache as it was
  const size_t D = size_t(kv_dim_), N = size_t(n);
  auto get = [&](size_t off, size_t bytes, const Layer& L) {
    std::memcpy(L.base + off, in, bytes);
    in += bytes;
  };
  for (const Layer& L : layers_) {
    switch (type_) {
      case KvType::f32:
        get(L.k, N * D * 4, L);
        get(L.v, N * D * 4, L);
        break;
      case KvType::f16:
        get(L.k, N * D * 2, L);
        get(L.v, N * D * 2, L);
        break;
      case KvType::q8:
        get(L.k, N * D, L);
        get(L.v, N * D, L);
        get(L.ks, N * (D / kKvQ8Group) * 4, L);
        get(L.vs, N * (D / kKvQ8Group) * 4, L);
        break;
      case KvType::q4: {
        const size_t row0 = size_t(n / G * G % L.recent) * D * 2;
        get(L.groups, size_t(n / G) * group_bytes(), L);
        get(L.tail_k + row0, size_t(n % G) * D * 2, L);
        get(L.tail_v + row0, size_t(n % G) * D * 2, L);
        break;
      }
    }
  }
  end_ = n;
  shrink_to(n);  // a shorter prefix than the cache held: release the blocks past it
  return {};
}

}  // namespace pllm
