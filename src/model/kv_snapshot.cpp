// KV snapshots: positions [0, n) of a KvCache and the tokens that produced them, as bytes
// (kv_snapshot.h). Two parts: the cache's own slots of those positions, copied in its storage
// format so a restored cache is bit-identical to the one that computed the prefix (no
// re-quantisation, no rounding; KvCache::export_prefix / import_prefix, declared in
// kv_cache.h), and the envelope around them (header, tokens, checksum).
#include "model/kv_snapshot.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/checked.h"
#include "base/hash.h"

namespace pllm {
namespace {

constexpr int G = kKvQ4GroupTokens;
constexpr char kMagic[8] = {'P', 'L', 'L', 'M', 'K', 'V', 'S', 'N'};
constexpr size_t kChecksumAt = 56;

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint64_t checksum(const uint8_t* header, std::span<const uint8_t> payload) {
  Hasher h(0x4b56534eull);
  h.update(header, kChecksumAt);
  h.update(payload.data(), payload.size());
  return h.digest();
}

Error bad(const std::string& what) { return make_error(Status::bad_format, "KV snapshot: " + what); }

}  // namespace

// The cache's slots.

size_t KvCache::layer_prefix_bytes(const Layer& L, int n) const {
  const size_t D = size_t(L.D), N = size_t(n);
  if (L.shared) return 0;  // its source layer's part holds it
  if (L.conv)  // the conv rows before n, then (DeltaNet) the state after n - 1
    return size_t(std::min(n, conv_taps_ - 1)) * size_t(conv_dim_) * 4 + (L.delta && n > 0 ? delta_floats_ * 4 : 0);
  switch (type_) {
    case KvType::f32: return 2 * N * D * 4;
    case KvType::f16: return 2 * N * D * 2;
    case KvType::q8: return 2 * N * D + 2 * N * (D / kKvQ8Group) * 4;
    case KvType::q4: return size_t(n / G) * group_bytes(D) + 2 * size_t(n % G) * D * 2;
  }
  return 0;
}

size_t KvCache::payload_bytes(int n) const {
  size_t total = 0;
  for (const Layer& L : layers_) total += layer_prefix_bytes(L, n);
  return total;
}

// A layer's own window (Gemma's local layers: no sinks) keeps position p in slot p until its
// ring wraps, the layout of a layer without one: such a layer can be snapshotted (and restored)
// while positions [0, end) are all in place. A session-wide window (sinks) cannot.
bool KvCache::windows_in_place(int e) const {
  for (const Layer& L : layers_)
    if (L.window > 0 && (L.sinks > 0 || e > L.ring)) return false;
  return true;
}

Result<size_t> KvCache::prefix_bytes(int n) const {
  if (!windows_in_place(end_))
    return make_error(Status::unsupported, "KV snapshots need a cache without a sliding window (or whose "
                                           "sliding-window layers have not wrapped yet)");
  if (n < 0 || n > end_)
    return make_error(Status::out_of_range, "KV snapshot of " + std::to_string(n) + " positions, but the cache holds " +
                                                std::to_string(end_));
  // q4: the partial group at n is exported from its f16 rows, kept for the newest positions
  // (a group + a batch): the same rule as truncate().
  if (type_ == KvType::q4 && n % G != 0 && n / G * G < end_ - q4_recent())
    return make_error(Status::invalid_argument, "a q4 KV snapshot must end on a group of " + std::to_string(G) +
                                                    " positions or inside a group whose f16 rows are still kept");
  if (delta_floats_ > 0 && n != 0 && n != end_ && n != delta_ckpt_)
    return make_error(Status::invalid_argument, "the DeltaNet state at position " + std::to_string(n) +
                                                    " is not held (only at the end, " + std::to_string(end_) +
                                                    ", and at the checkpoint, " + std::to_string(delta_ckpt_) + ")");
  if (!conv_resumable(n))
    return make_error(Status::invalid_argument, "the convolution state at position " + std::to_string(n) +
                                                    " is no longer held (it is kept for the last " +
                                                    std::to_string(kConvRollback) + " positions)");
  return payload_bytes(n);
}

std::vector<std::span<uint8_t>> KvCache::prefix_spans(int n, bool importing) const {
  const size_t N = size_t(n);
  std::vector<std::span<uint8_t>> out;
  out.reserve(layers_.size() * 4);
  for (const Layer& L : layers_) {
    if (L.shared) continue;
    const size_t D = size_t(L.D);
    auto add = [&](size_t off, size_t bytes) { out.emplace_back(L.base + off, bytes); };
    if (L.conv) {
      const size_t row = size_t(conv_dim_) * 4;
      const int p0 = std::max(0, n - conv_taps_ + 1), k = n - p0;
      // The state after n - 1: the live one at end() (and where a snapshot is restored), else
      // the checkpoint (prefix_bytes allowed only those), whose conv rows are beside it.
      const bool live = importing || n == end_;
      if (L.delta && n > 0 && !live) {
        add(L.dc + delta_floats_ * 4 + size_t(conv_taps_ - 1 - k) * row, size_t(k) * row);
        add(L.dc, delta_floats_ * 4);
        continue;
      }
      const int s0 = p0 % conv_hist_, first = std::min(k, conv_hist_ - s0);  // rows [p0, n): at most one wrap
      add(L.k + size_t(s0) * row, size_t(first) * row);
      add(L.k, size_t(k - first) * row);
      if (L.delta && n > 0) add(L.ds, delta_floats_ * 4);
      continue;
    }
    switch (type_) {
      case KvType::f32:
        add(L.k, N * D * 4);
        add(L.v, N * D * 4);
        break;
      case KvType::f16:
        add(L.k, N * D * 2);
        add(L.v, N * D * 2);
        break;
      case KvType::q8:
        add(L.k, N * D);
        add(L.v, N * D);
        add(L.ks, N * (D / kKvQ8Group) * 4);
        add(L.vs, N * (D / kKvQ8Group) * 4);
        break;
      case KvType::q4: {  // no window: no sinks, group g sits in ring slot g; its f16 rows at g*G % recent
        const size_t row0 = size_t(n / G * G % L.recent) * D * 2;
        add(L.groups, size_t(n / G) * group_bytes(D));
        add(L.tail_k + row0, size_t(n % G) * D * 2);
        add(L.tail_v + row0, size_t(n % G) * D * 2);
        break;
      }
    }
  }
  return out;
}

Result<void> KvCache::export_prefix(int n, uint8_t* out) const {
  PLLM_TRY(prefix_bytes(n));
  for (std::span<const uint8_t> s : prefix_spans(n)) {
    if (!s.empty()) std::memcpy(out, s.data(), s.size());
    out += s.size();
  }
  return {};
}

Result<void> KvCache::import_prefix(int n, const uint8_t* in, size_t len) {
  ++stamp_;
  if (!windows_in_place(n))
    return make_error(Status::unsupported, "KV snapshots need a cache without a sliding window (or one whose "
                                           "sliding-window layers hold the snapshot's positions without wrapping)");
  if (n < 0 || n > n_ctx_)
    return make_error(Status::out_of_range, "KV snapshot of " + std::to_string(n) +
                                                " positions does not fit the context of " + std::to_string(n_ctx_));
  if (len != payload_bytes(n))
    return make_error(Status::bad_format, "KV snapshot payload has " + std::to_string(len) + " bytes, expected " +
                                              std::to_string(payload_bytes(n)));
  PLLM_TRY(grow_to(n));  // before anything changes: a failure leaves the cache as it was
  for (std::span<uint8_t> s : prefix_spans(n, /*importing=*/true)) {
    if (!s.empty()) std::memcpy(s.data(), in, s.size());
    in += s.size();
  }
  end_ = n;
  delta_ckpt_ = -1;
  std::fill(layer_ckpt_.begin(), layer_ckpt_.end(), -1);
  if (delta_floats_ > 0 && n > 0 && n % kDeltaCheckpoint == 0) {  // a block boundary: also the checkpoint
    for (size_t l = 0; l < layers_.size(); ++l)
      if (layers_[l].delta) {
        std::memcpy(delta_at(int(l), true), delta_at(int(l), false), delta_floats_ * 4);
        copy_checkpoint_conv(int(l), n, /*to_ring=*/false);
        set_delta_checkpoint(int(l), n);
      }
  }
  if (conv_hist_ > 0) conv_lo_ = std::max(0, n - conv_taps_ + 1);  // the rows the snapshot held
  shrink_to(n);  // a shorter prefix than the cache held: release the blocks past it
  return {};
}

// The envelope.

std::vector<int32_t> KvSnapshotView::token_ids() const {
  std::vector<int32_t> ids(static_cast<size_t>(n_pos));
  if (!ids.empty()) std::memcpy(ids.data(), tokens.data(), ids.size() * 4);
  return ids;
}

Result<std::vector<uint8_t>> make_kv_snapshot(const KvCache& kv, uint64_t model_id, std::span<const int32_t> tokens) {
  const int n = int(tokens.size());
  PLLM_ASSIGN(const size_t kv_bytes, kv.prefix_bytes(n));
  const size_t payload = tokens.size() * 4 + kv_bytes;
  std::vector<uint8_t> out;
  try {
    out.resize(kKvSnapshotHeaderBytes + payload);
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "KV snapshot of " + std::to_string(payload) + " bytes");
  }
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, 8);
  put32(h + 8, kKvSnapshotVersion);
  put32(h + 12, uint32_t(kv.type()));
  put64(h + 16, model_id);
  put32(h + 24, uint32_t(kv.n_layer()));
  put32(h + 28, uint32_t(kv.kv_dim()));
  put32(h + 32, uint32_t(kv.head_dim()));
  put32(h + 36, uint32_t(n));
  put32(h + 40, uint32_t(kKvQ4GroupTokens));
  put32(h + 44, 0);
  put64(h + 48, payload);
  uint8_t* p = h + kKvSnapshotHeaderBytes;
  if (n > 0) std::memcpy(p, tokens.data(), tokens.size() * 4);
  PLLM_TRY(kv.export_prefix(n, p + tokens.size() * 4));
  put64(h + kChecksumAt, checksum(h, std::span<const uint8_t>(p, payload)));
  return out;
}

Result<KvSnapshotView> parse_kv_snapshot(std::span<const uint8_t> bytes, bool verify_checksum) {
  if (bytes.size() < kKvSnapshotHeaderBytes) return bad("truncated header (" + std::to_string(bytes.size()) + " bytes)");
  const uint8_t* h = bytes.data();
  if (std::memcmp(h, kMagic, 8) != 0) return bad("not a snapshot (bad magic)");
  KvSnapshotView s;
  s.version = get32(h + 8);
  if (s.version != kKvSnapshotVersion)
    return bad("format version " + std::to_string(s.version) + ", this build reads " +
               std::to_string(kKvSnapshotVersion));
  const uint32_t type = get32(h + 12);
  if (type > uint32_t(KvType::q4)) return bad("unknown KV type " + std::to_string(type));
  s.type = KvType(type);
  s.model_id = get64(h + 16);
  const uint32_t n_layer = get32(h + 24), kv_dim = get32(h + 28), head_dim = get32(h + 32), n_pos = get32(h + 36);
  if (n_layer > (1u << 16) || kv_dim > (1u << 20) || head_dim > (1u << 16) || n_pos > (1u << 24))
    return bad("shape out of range");
  if (get32(h + 40) != uint32_t(kKvQ4GroupTokens) || get32(h + 44) != 0) return bad("unsupported block size");
  s.n_layer = int(n_layer);
  s.kv_dim = int(kv_dim);
  s.head_dim = int(head_dim);
  s.n_pos = int(n_pos);
  const uint64_t payload = get64(h + 48);
  const auto total = checked_add(payload, kKvSnapshotHeaderBytes);
  if (!total || *total != bytes.size())
    return bad("payload of " + std::to_string(payload) + " bytes but " +
               std::to_string(bytes.size() - kKvSnapshotHeaderBytes) + " present (truncated?)");
  const auto tok_bytes = checked_mul(n_pos, 4);
  if (!tok_bytes || *tok_bytes > payload) return bad("token list larger than the payload");
  const auto body = bytes.subspan(kKvSnapshotHeaderBytes);
  if (verify_checksum && checksum(h, body) != get64(h + kChecksumAt)) return bad("checksum mismatch (corrupt)");
  s.tokens = body.subspan(0, size_t(*tok_bytes));
  s.kv = body.subspan(size_t(*tok_bytes));
  return s;
}

Result<void> restore_kv_snapshot(KvCache& kv, uint64_t model_id, const KvSnapshotView& s) {
  if (s.model_id != model_id) return make_error(Status::invalid_argument, "KV snapshot was taken with another model");
  if (s.type != kv.type())
    return make_error(Status::invalid_argument, std::string("KV snapshot holds a ") + kv_type_name(s.type) +
                                                    " cache, this session uses " + kv_type_name(kv.type()));
  if (s.n_layer != kv.n_layer() || s.kv_dim != kv.kv_dim() || s.head_dim != kv.head_dim())
    return make_error(Status::invalid_argument, "KV snapshot shapes do not match this model");
  return kv.import_prefix(s.n_pos, s.kv.data(), s.kv.size());
}

}  // namespace pllm
