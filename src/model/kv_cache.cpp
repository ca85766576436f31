#include "model/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>

#include "base/checked.h"
#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"

namespace pllm {
namespace {

constexpr int G = kKvQ4GroupTokens;
constexpr size_t kAlign = 128;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
int round_up(int n, int m) { return (n + m - 1) / m * m; }

}  // namespace

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::q8: return "q8";
    case KvType::q4: return "q4";
  }
  return "?";
}

Result<KvType> parse_kv_type(const std::string& s) {
  if (s == "f32") return KvType::f32;
  if (s == "f16") return KvType::f16;
  if (s == "q8") return KvType::q8;
  if (s == "q4") return KvType::q4;
  return make_error(Status::invalid_argument, "unknown KV type '" + s + "' (expected f32, f16, q8 or q4)");
}

Result<void> KvCache::validate(const ModelConfig& c, const KvOptions& o) {
  if (o.window < 0 || o.window > (1 << 24))
    return make_error(Status::invalid_argument, "KV window " + std::to_string(o.window) + " is out of range");
  if (o.sinks < 0 || o.sinks > 4096)
    return make_error(Status::invalid_argument, "KV sinks " + std::to_string(o.sinks) + " is out of range");
  if (o.window > 0 && o.window <= o.sinks)
    return make_error(Status::invalid_argument, "KV window (" + std::to_string(o.window) +
                                                    ") must be larger than the number of sinks (" +
                                                    std::to_string(o.sinks) + ")");
  if (c.n_head_kv <= 0 || c.n_head / c.n_head_kv > kMaxGroup)
    return make_error(Status::unsupported, "more than " + std::to_string(kMaxGroup) + " query heads per KV head");
  for (int l = 0; l < c.n_layer; ++l)
    if ((o.type == KvType::q8 || o.type == KvType::q4) && c.head_dim_at(l) % kKvQ8Group != 0)
      return make_error(Status::unsupported, std::string("KV type ") + kv_type_name(o.type) +
                                                 " needs a head size that is a multiple of 64 (this model has " +
                                                 std::to_string(c.head_dim_at(l)) + ")");
  return {};
}

KvCache::KvCache(const ModelConfig& c, const KvOptions& o, int n_ctx, int n_batch,
                 const std::vector<int>& layer_window)
    : type_(o.type), kv_dim_(c.kv_dim()), head_dim_(c.head_dim), n_ctx_(n_ctx) {
  if (c.conv_taps > 0) {
    conv_dim_ = c.conv_row_dim();
    delta_floats_ = c.delta_net() ? c.dn_state_floats() : 0;
    conv_taps_ = c.conv_taps;
    conv_hist_ = c.conv_taps - 1 + (delta_floats_ > 0 ? 0 : kConvRollback);
  }
  static std::atomic<uint32_t> next_id{1};  // ids only: caches share nothing else
  stamp_ = uint64_t(next_id.fetch_add(1, std::memory_order_relaxed)) << 32;
  layers_.resize(size_t(c.n_layer));
  unbounded_ = true;
  const size_t page = ReservedMemory::page_size();
  size_t off = 0;
  // Each array on its own pages, so releasing the end of one never touches another.
  auto place = [&](size_t stride, int cap, int first, int unit) -> size_t {
    const auto start = checked_align_up(off, page);
    const auto len = checked_mul(stride, uint64_t(cap));
    const auto end = start && len ? checked_add(*start, *len) : std::nullopt;
    if (!end || *end > SIZE_MAX / 2) throw std::bad_alloc();
    off = size_t(*end);
    if (cap > 0) regions_.push_back(Region{size_t(*start), stride, cap, first, unit, 0});
    return size_t(*start);
  };
  regions_.reserve(size_t(c.n_layer) * 5);
  for (int l = 0; l < c.n_layer; ++l) {
    Layer& L = layers_[size_t(l)];
    if (c.shares_kv(l)) {  // no arrays: its source layer's entry is copied in once all are placed
      L.shared = true;
      continue;
    }
    L.D = c.kv_dim_at(l);
    L.hd = c.head_dim_at(l);
    if (c.is_recurrent(l)) {
      L.conv = true;
      L.k = place(size_t(conv_dim_) * 4, conv_hist_, 0, 1);
      if (delta_floats_ > 0) {  // one slot each, committed with the first position
        L.delta = true;
        L.ds = place(delta_floats_ * 4, 1, 0, 1);
        L.dc = place((delta_floats_ + size_t(conv_taps_ - 1) * size_t(conv_dim_)) * 4, 1, 0, 1);  // + its conv rows
      }
      continue;
    }
    const int own = size_t(l) < layer_window.size() ? layer_window[size_t(l)] : 0;
    if (o.window > 0 && (own == 0 || o.window < own)) {
      L.window = o.window;
      L.sinks = o.sinks;
    } else if (own > 0) {
      L.window = own;
      L.sinks = 0;
    }
    if (L.window > 0) {
      // Room for the window plus one batch: a batch stores all its positions before its
      // first query attends, and that query still needs the window behind it. q4 also keeps
      // the group being filled in the tail while its ring slot still holds older positions.
      L.ring = L.window - L.sinks + n_batch - 1;
      L.ring = type_ == KvType::q4 ? round_up(L.ring + G, G) : round_up(L.ring, 8);
    }
    if (L.window == 0) {
      unbounded_ = false;
      L.sinks = 0;
      L.ring = type_ == KvType::q4 ? round_up(n_ctx, G) : n_ctx;
    }
    // q4: the f16 rows hold the group being filled plus a batch, so every query of a batch
    // finds its own incomplete group there after the whole batch was stored.
    if (type_ == KvType::q4) L.recent = round_up(G + n_batch, G);
    const int slots = L.sinks + L.ring;
    const size_t D = size_t(L.D);
    switch (type_) {
      case KvType::f32:
      case KvType::f16: {
        const size_t row = D * (type_ == KvType::f32 ? 4 : 2);
        L.k = place(row, slots, 0, 1);
        L.v = place(row, slots, 0, 1);
        break;
      }
      case KvType::q8:
        L.k = place(D, slots, 0, 1);
        L.v = place(D, slots, 0, 1);
        L.ks = place((D / kKvQ8Group) * 4, slots, 0, 1);
        L.vs = place((D / kKvQ8Group) * 4, slots, 0, 1);
        break;
      case KvType::q4:
        L.k = place(D * 2, L.sinks, 0, 1);
        L.v = place(D * 2, L.sinks, 0, 1);
        L.tail_k = place(D * 2, L.recent, L.sinks, 1);
        L.tail_v = place(D * 2, L.recent, L.sinks, 1);
        L.groups = place(group_bytes(D), L.ring / G, L.sinks, G);
        break;
    }
  }
  for (int l = 0; l < c.n_layer; ++l)
    if (c.shares_kv(l)) layers_[size_t(l)] = layers_[size_t(c.kv_layer(l))], layers_[size_t(l)].shared = true;
  if (delta_floats_ > 0) layer_ckpt_.assign(layers_.size(), -1);
  memory_ = ReservedMemory(off);
  for (Layer& L : layers_) L.base = memory_.data();
  update_grow_at();
  if (type_ == KvType::q4) scratch_.resize(size_t(2 * kv_dim_));
}

int KvCache::Region::used(int e) const { return std::min(std::max(0, e - first) / unit, cap); }

size_t KvCache::Region::bytes(int slots) const {
  const size_t page = ReservedMemory::page_size();
  return (size_t(slots) * stride + page - 1) / page * page;  // <= the region's pages: checked at placement
}

Result<void> KvCache::grow_to(int e) {
  for (Region& r : regions_) {
    const int per_block = kBlock / r.unit;
    const int want = std::min(round_up(r.used(e), per_block), r.cap);
    if (want <= r.covered) continue;
    const size_t have = r.bytes(r.covered), need = r.bytes(want);
    // Pages past `have` were never committed or were released: they hold no data.
    if (!memory_.commit(r.off + have, need - have)) {
      update_grow_at();
      return make_error(Status::out_of_memory, "no memory for KV block " + std::to_string(e / kBlock) + " (" +
                                                   std::to_string(need - have) + " bytes)");
    }
    r.covered = want;
  }
  update_grow_at();
  return {};
}

void KvCache::shrink_to(int e) {
  for (Region& r : regions_) {
    const int per_block = kBlock / r.unit;
    const int want = std::min(round_up(r.used(e), per_block), r.cap);
    if (want >= r.covered) continue;
    const size_t keep = r.bytes(want), have = r.bytes(r.covered);
    memory_.release(r.off + keep, have - keep);  // the page holding slot want - 1 stays
    r.covered = want;
  }
  update_grow_at();
}

void KvCache::update_grow_at() {
  int64_t at = INT32_MAX;
  for (const Region& r : regions_)
    if (r.covered < r.cap) at = std::min(at, int64_t(r.first) + int64_t(r.covered + 1) * r.unit - 1);
  grow_at_ = int(at);
}

size_t KvCache::committed_bytes() const {
  if (!ReservedMemory::grows_on_demand()) return bytes();
  size_t n = 0;
  for (const Region& r : regions_) n += r.bytes(r.covered);
  return n;
}

// q4 group block: k_scale[D] k_min[D] (f16) | k_codes[G][D/2] | v_scale[G][D/32] v_min[G][D/32] (f16) |
// v_codes[G][D/2], each part 128-byte aligned.
size_t KvCache::group_bytes(size_t D) const {
  return align_up(D * 4) + align_up(G * D / 2) + align_up(G * (D / kKvQ4ValueBlock) * 4) + align_up(G * D / 2);
}

bool KvCache::fits(int64_t pos0, int64_t n) const { return unbounded_ || pos0 + n <= n_ctx_; }

int KvCache::window_lo(const Layer& L, int pos) {
  if (L.window == 0) return 0;
  return std::max(L.sinks, pos - (L.window - L.sinks) + 1);
}

int KvCache::q4_tail_for(const Layer& L, int pos) {
  if (pos + 1 <= L.sinks) return L.sinks;
  return L.sinks + (pos + 1 - L.sinks) / G * G;
}

int KvCache::oldest_kept(const Layer& L) const {
  if (L.window == 0) return 0;
  const int newest_group = type_ == KvType::q4 ? q4_tail_for(L, end_ - 1) : end_;  // its incomplete group
  return std::max(L.sinks, newest_group - L.ring);
}

void KvCache::set_delta_checkpoint(int l, int n) {
  layer_ckpt_[size_t(l)] = n;
  delta_ckpt_ = n;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i].delta && layer_ckpt_[i] != n) delta_ckpt_ = -1;
}

void KvCache::copy_checkpoint_conv(int l, int n, bool to_ring) {
  float* cc = delta_checkpoint_conv(l);
  for (int t = 0; t < conv_taps_ - 1; ++t) {
    const int p = n - (conv_taps_ - 1) + t;
    float* row = cc + size_t(t) * size_t(conv_dim_);
    if (p < 0) {
      if (!to_ring) std::memset(row, 0, size_t(conv_dim_) * 4);
      continue;
    }
    if (to_ring) {
      std::memcpy(conv_row(l, p), row, size_t(conv_dim_) * 4);
    } else {
      std::memcpy(row, conv_row(l, p), size_t(conv_dim_) * 4);
    }
  }
}

int KvCache::truncate(int n) {
  ++stamp_;
  int m = std::clamp(n, 0, end_);
  // DeltaNet state: the checkpoint when it is there (and not past m), else from 0.
  if (delta_floats_ > 0 && m != end_) m = delta_ckpt_ > 0 && delta_ckpt_ <= m && conv_resumable(delta_ckpt_) ? delta_ckpt_ : 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (!conv_resumable(m)) m = 0;
    for (const Layer& L : layers_) {
      if (L.conv) continue;
      // Resuming inside a quantised group needs that group's f16 rows before m (its later
      // queries read them until the group is complete again): else resume at its start.
      const int g0 = m > L.sinks ? L.sinks + (m - L.sinks) / G * G : m;
      if (type_ == KvType::q4 && m > g0 && g0 < end_ - L.recent) m = g0;
      if (m > L.sinks && window_lo(L, m) < oldest_kept(L)) m = L.sinks;  // overwritten already
    }
  }
  if (!conv_resumable(m)) m = 0;
  if (m == 0) conv_lo_ = 0;  // the state at 0 is zeros: nothing to read
  if (delta_floats_ > 0 && m != end_ && m > 0) {  // the checkpoint: its state and conv rows
    for (size_t l = 0; l < layers_.size(); ++l)
      if (layers_[l].delta) {
        std::memcpy(delta_at(int(l), false), delta_at(int(l), true), delta_floats_ * 4);
        copy_checkpoint_conv(int(l), m, /*to_ring=*/true);
      }
    conv_lo_ = std::max(0, m - conv_taps_ + 1);
  }
  if (delta_ckpt_ > m) {
    delta_ckpt_ = -1;
    std::fill(layer_ckpt_.begin(), layer_ckpt_.end(), -1);
  }
  end_ = m;
  shrink_to(m);
  return m;
}

namespace {
// f32 -> IEEE half, round to nearest even: the table's vector conversion (bit for bit
// fp32_to_fp16, tests/cpp/test_f16act.cpp); the scalar loop took 4 % of a prompt's time.
void to_f16(const float* x, uint16_t* y, size_t n) { kernels().f32_to_f16_row(x, y, int64_t(n)); }
}  // namespace

void KvCache::store(int l, int pos, const float* k, const float* v) {
  const Layer& L = layers_[size_t(l)];
  const size_t D = size_t(L.D);
  uint8_t* base = L.base;
  if (type_ == KvType::q4) {
    uint16_t* kd;
    uint16_t* vd;
    int t = -1;
    if (pos < L.sinks) {
      kd = reinterpret_cast<uint16_t*>(base + L.k) + size_t(pos) * D;
      vd = reinterpret_cast<uint16_t*>(base + L.v) + size_t(pos) * D;
    } else {
      t = (pos - L.sinks) % G;
      const size_t row = size_t((pos - L.sinks) % L.recent);
      kd = reinterpret_cast<uint16_t*>(base + L.tail_k) + row * D;
      vd = reinterpret_cast<uint16_t*>(base + L.tail_v) + row * D;
    }
    to_f16(k, kd, D);
    to_f16(v, vd, D);
    if (t == G - 1) {  // the group is complete: quantise it into its ring slot
      const int g = ((pos - L.sinks) % L.ring) / G;
      uint8_t* gb = base + L.groups + size_t(g) * group_bytes(D);
      uint16_t* ks = reinterpret_cast<uint16_t*>(gb);
      uint8_t* kc = gb + align_up(D * 4);
      uint16_t* vsc = reinterpret_cast<uint16_t*>(kc + align_up(G * D / 2));
      uint16_t* vmn = vsc + size_t(G) * (D / kKvQ4ValueBlock);
      uint8_t* vc = reinterpret_cast<uint8_t*>(vsc) + align_up(G * (D / kKvQ4ValueBlock) * 4);
      // The group's rows are contiguous in the f16 ring (recent is a multiple of G).
      const size_t first = size_t((pos - G + 1 - L.sinks) % L.recent) * D;
      const uint16_t* tk = reinterpret_cast<const uint16_t*>(base + L.tail_k) + first;
      const uint16_t* tv = reinterpret_cast<const uint16_t*>(base + L.tail_v) + first;
      kv_quantize_q4_keys(tk, int64_t(D), int(D), kc, int64_t(D / 2), ks, ks + D);
      float* row = scratch_.data();
      for (int j = 0; j < G; ++j) {
        for (size_t i = 0; i < D; ++i) row[i] = fp16_to_fp32(tv[size_t(j) * D + i]);
        const size_t nb = D / kKvQ4ValueBlock;
        kv_quantize_q4_values(row, int(D), vc + size_t(j) * D / 2, vsc + size_t(j) * nb, vmn + size_t(j) * nb);
      }
    }
    return;
  }
  const size_t slot = pos < L.sinks ? size_t(pos) : size_t(L.sinks + (pos - L.sinks) % L.ring);
  switch (type_) {
    case KvType::f32:
      std::memcpy(reinterpret_cast<float*>(base + L.k) + slot * D, k, D * 4);
      std::memcpy(reinterpret_cast<float*>(base + L.v) + slot * D, v, D * 4);
      break;
    case KvType::f16: {
      uint16_t* kd = reinterpret_cast<uint16_t*>(base + L.k) + slot * D;
      uint16_t* vd = reinterpret_cast<uint16_t*>(base + L.v) + slot * D;
      to_f16(k, kd, D);
      to_f16(v, vd, D);
      break;
    }
    case KvType::q8: {
      const size_t ns = D / kKvQ8Group;
      kv_quantize_q8(k, int(D), reinterpret_cast<int8_t*>(base + L.k) + slot * D,
                     reinterpret_cast<float*>(base + L.ks) + slot * ns);
      kv_quantize_q8(v, int(D), reinterpret_cast<int8_t*>(base + L.v) + slot * D,
                     reinterpret_cast<float*>(base + L.vs) + slot * ns);
      break;
    }
    case KvType::q4: break;
  }
}

// Positions [lo, hi) of one storage area: all sinks (< S), or all in the ring (may wrap), or
// (q4) split further into quantised groups and the f16 tail; for the n_q query heads sharing
// kv_head (q + j * head_dim, a[j]) in one kernel call per piece, so the piece is read once.
void KvCache::attend_range(const Layer& L, int pos, int lo, int hi, int kv_head, int n_q, const float* q,
                           AttnScore scale, AttnAccum* a) const {
  if (hi <= lo) return;
  const KernelTable& kt = kernels();
  const int hd = L.hd;
  const int64_t D = L.D;
  const uint8_t* base = L.base;
  const size_t hoff = size_t(kv_head) * size_t(hd);
  // f16 rows: q4 sinks and tail.
  auto f16_rows = [&](size_t koff, size_t voff, int first_row, int n) {
    const uint16_t* k = reinterpret_cast<const uint16_t*>(base + koff) + size_t(first_row) * D + hoff;
    const uint16_t* v = reinterpret_cast<const uint16_t*>(base + voff) + size_t(first_row) * D + hoff;
    kt.attn_seg_f16(q, n_q, k, v, D, n, hd, scale, a);
  };
  if (type_ == KvType::q4) {
    if (hi <= L.sinks) return f16_rows(L.k, L.v, lo, hi - lo);
    const int tail = q4_tail_for(L, pos);
    for (int p = lo; p < std::min(hi, tail);) {
      const int r = (p - L.sinks) % L.ring;
      const int g = r / G, t0 = r % G;
      const int t1 = std::min(G, t0 + (std::min(hi, tail) - p));
      const uint8_t* gb = base + L.groups + size_t(g) * group_bytes(size_t(D));
      const uint16_t* ks = reinterpret_cast<const uint16_t*>(gb);
      const uint8_t* kc = gb + align_up(size_t(D) * 4);
      const uint16_t* vsc = reinterpret_cast<const uint16_t*>(kc + align_up(size_t(G) * D / 2));
      const size_t nb = size_t(D) / kKvQ4ValueBlock;
      const uint8_t* vc = reinterpret_cast<const uint8_t*>(vsc) + align_up(size_t(G) * nb * 4);
      KvQ4GroupView view{ks + hoff,
                         ks + size_t(D) + hoff,
                         kc + hoff / 2,
                         vsc + hoff / kKvQ4ValueBlock,
                         vsc + size_t(G) * nb + hoff / kKvQ4ValueBlock,
                         vc + hoff / 2,
                         D / 2,
                         int64_t(nb)};
      kt.attn_seg_q4(q, n_q, view, t0, t1, hd, scale, a);
      p += t1 - t0;
    }
    if (hi > tail) {  // the f16 rows, a ring of L.recent: at most one wrap
      const int from = std::max(lo, tail), n = hi - from;
      const int r0 = (from - L.sinks) % L.recent, first = std::min(n, L.recent - r0);
      f16_rows(L.tail_k, L.tail_v, r0, first);
      if (n > first) f16_rows(L.tail_k, L.tail_v, 0, n - first);
    }
    return;
  }
  // Slot ranges: sinks map 1:1; ring positions may wrap once.
  auto slots = [&](int s0, int n) {
    switch (type_) {
      case KvType::f32: {
        const float* k = reinterpret_cast<const float*>(base + L.k) + size_t(s0) * D + hoff;
        const float* v = reinterpret_cast<const float*>(base + L.v) + size_t(s0) * D + hoff;
        kt.attn_seg_f32(q, n_q, k, v, D, n, hd, scale, a);
        break;
      }
      case KvType::f16: f16_rows(L.k, L.v, s0, n); break;
      case KvType::q8: {
        const int64_t ns = D / kKvQ8Group;
        const int8_t* k = reinterpret_cast<const int8_t*>(base + L.k) + size_t(s0) * D + hoff;
        const int8_t* v = reinterpret_cast<const int8_t*>(base + L.v) + size_t(s0) * D + hoff;
        const float* ks = reinterpret_cast<const float*>(base + L.ks) + size_t(s0) * ns + hoff / kKvQ8Group;
        const float* vs = reinterpret_cast<const float*>(base + L.vs) + size_t(s0) * ns + hoff / kKvQ8Group;
        kt.attn_seg_q8(q, n_q, k, ks, v, vs, D, ns, n, hd, scale, a);
        break;
      }
      case KvType::q4: break;
    }
  };
  if (hi <= L.sinks) return slots(lo, hi - lo);
  const int r0 = (lo - L.sinks) % L.ring;
  const int n = hi - lo;
  const int first = std::min(n, L.ring - r0);
  slots(L.sinks + r0, first);
  if (n > first) slots(L.sinks, n - first);
}

void merge_accum(AttnAccum& into, const AttnAccum& from, int head_dim) {
  if (from.l == 0.0f) return;
  if (into.l == 0.0f) {
    into.m = from.m;
    into.l = from.l;
    for (int d = 0; d < head_dim; ++d) into.acc[d] = from.acc[d];
    return;
  }
  const float m = std::max(into.m, from.m);
  const float a = std::exp(into.m - m), b = std::exp(from.m - m);
  into.l = into.l * a + from.l * b;
  for (int d = 0; d < head_dim; ++d) into.acc[d] = into.acc[d] * a + from.acc[d] * b;
  into.m = m;
}

int KvCache::n_visible(int l, int pos, int last) const {
  const Layer& L = layers_[size_t(l)];
  last = std::max(last, pos);
  return std::min(L.sinks, last + 1) + std::max(0, last + 1 - std::max(window_lo(L, pos), L.sinks));
}

void KvCache::attend_rows(int l, int pos0, int n_rows, int kv_head, int n_q, const float* q, AttnScore scale,
                          const RopeSpec& rope, AttnAccum* a) const {
  const Layer& L = layers_[size_t(l)];
  const size_t hq = size_t(n_q) * size_t(L.hd);
  if (L.window != 0 || (type_ != KvType::f16 && type_ != KvType::f32) || pos0 + 1 < L.sinks ||
      n_rows * n_q > kMaxGroup) {
    for (int r = 0; r < n_rows; ++r) attend_part(l, pos0 + r, kv_head, n_q, q + size_t(r) * hq, scale, rope, 0, 1, a + r * n_q);
    return;
  }
  // Without a window attend_part folds [0, sinks) and then [sinks, pos] in two segment calls,
  // each in chunks of kAttnChunk from its start. Shared here: the sinks, and the whole chunks
  // of the second segment that the first row sees; each row then folds the rest from that
  // chunk boundary on, as its own call would.
  const int S = L.sinks, nq = n_rows * n_q;
  if (S > 0) attend_range(L, pos0, 0, S, kv_head, nq, q, scale, a);
  const int m = (pos0 + 1 - S) / kAttnChunk * kAttnChunk;
  if (m > 0) attend_range(L, pos0, S, S + m, kv_head, nq, q, scale, a);
  for (int r = 0; r < n_rows; ++r)
    attend_range(L, pos0 + r, S + m, pos0 + r + 1, kv_head, n_q, q + size_t(r) * hq, scale, a + r * n_q);
}

void KvCache::attend_part(int l, int pos, int kv_head, int n_q, const float* q, AttnScore scale, const RopeSpec& rope,
                          int part, int n_parts, AttnAccum* a, int last) const {
  const Layer& L = layers_[size_t(l)];
  const int lo = window_lo(L, pos);
  const int n_sink = std::min(L.sinks, std::max(last, pos) + 1);
  const int total = n_visible(l, pos, last);
  // This slice: visible indices [b, e) over sinks then window, in order.
  const int b = int(int64_t(total) * part / n_parts), e = int(int64_t(total) * (part + 1) / n_parts);
  if (b < n_sink) {
    const int hi = std::min(e, n_sink);
    if (lo > L.sinks) {
      // Tokens were evicted: score the sinks as if they sat right before the window.
      alignas(64) float qr[kMaxGroup * kMaxHeadDim];
      std::memcpy(qr, q, size_t(n_q) * size_t(L.hd) * sizeof(float));
      for (int j = 0; j < n_q; ++j)
        rope_f32(qr + size_t(j) * size_t(L.hd), rope.n_rot, rope.table(n_ctx_), -double(lo - L.sinks), rope.neox);
      attend_range(L, pos, b, hi, kv_head, n_q, qr, scale, a);
    } else {
      attend_range(L, pos, b, hi, kv_head, n_q, q, scale, a);
    }
  }
  const int w0 = std::max(lo, L.sinks) - n_sink;  // window index i is position i + w0
  if (e > n_sink) attend_range(L, pos, std::max(b, n_sink) + w0, e + w0, kv_head, n_q, q, scale, a);
}

}  // namespace pllm
