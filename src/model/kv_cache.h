// The KV cache of one session: per layer, the keys (after RoPE) and values of every
// position a future query may attend to, in a chosen storage type, with an optional
// sliding window that keeps the first `sinks` positions forever ("attention sinks",
// StreamingLLM) and the most recent `window - sinks` in a ring buffer.
//
// Per layer the slots are laid out as
//     [ sink slots 0 .. S-1 | ring slots S .. S+R-1 ]
// Position p < S lives in sink slot p; position p >= S in ring slot S + (p - S) % R. Nothing
// is ever moved: when the ring wraps, the oldest window positions are overwritten in place.
// RoPE stays correct because keys are stored rotated at their absolute positions, so a
// query sees every window key at its true distance; the sinks, which StreamingLLM places
// right before the window, are scored with the query rotated back by the number of
// evicted positions (a rotation composes, so R(p - d)q . R(i)k == R(p)q . R(i + d)k).
//
// Without a window (window = 0), S = 0 and R = n_ctx: position p is slot p, and a position
// >= n_ctx is an error for the caller to report.
//
// Types (kernels/kv_format.h): f32 (exact, for tests), f16 (default), q8 (int8 per 64
// channels), q4 (KIVI: keys per channel over groups of 32 tokens, values per token; the
// sinks and the newest positions also stay as f16 rows, and a query reads its own,
// incomplete group from those, so what it sees never depends on later positions or on
// how the prompt was split into batches).
//
// A hybrid model's convolution layers (ModelConfig::is_recurrent: lfm2's, qwen35's Gated
// DeltaNet) keep no keys or values but the convolution's state: the conv inputs
// [ModelConfig::conv_row_dim()] (f32) of the newest positions, in a ring of conv_taps - 1 +
// kConvRollback rows per layer. A step reads the conv_taps - 1 rows before its first position
// and writes its own; the ring's extra rows let truncate() and the snapshots go back up to
// kConvRollback positions from end() (a chat turn that re-renders the end of the last answer
// differently) and still resume exactly; further back the only exact point is 0, where the
// state is zeros. DeltaNet layers also keep a state that cannot be rewound (delta_state below),
// so only the end, their checkpoint and 0 are resumable: their ring has no extra rows (the
// checkpoint keeps the conv rows it needs; 29.6 MB less per sequence at Qwen3.5-0.8B).
//
// Layers may differ in width (Gemma 4: ModelConfig::kv_dim_at, head_dim_at), and a layer that
// shares another's keys and values (ModelConfig::kv_layer; Gemma 4's last layers) has no
// arrays of its own: it reads its source layer's (it is never stored to), so it costs no memory.
//
// Each layer's arrays start on their own page and a decode step reads each once, front to
// back. Stores are single-threaded (the forward pass writes a batch's keys and values before
// its attention); attend_part() is const and runs on many threads at once.
//
// Memory grows with use: the whole cache is reserved as address space (base/reserved_memory.h)
// and each array is committed in KV blocks of kBlock positions, up to the block holding the
// highest position it stores (rows: the slot; q4 groups: two groups of 32 per block), when a
// batch first crosses into the block (begin_batch: no heap allocation, one madvise per array).
// truncate() and import_prefix() to fewer positions release the whole blocks past the kept
// ones. A windowed layer's ring fills to its size, then wraps: it never commits more. Nothing
// reads a slot before it was written since the last release (a query sees only positions it
// stored; q4 reads only complete groups), so released memory is never taken for data.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/reserved_memory.h"
#include "base/result.h"
#include "kernels/kv_format.h"
#include "model/config.h"

namespace pllm {

enum class KvType { f32, f16, q8, q4 };
const char* kv_type_name(KvType t);
// "f32" | "f16" | "q8" | "q4"; error otherwise.
Result<KvType> parse_kv_type(const std::string& s);

struct KvOptions {
  KvType type = KvType::f16;
  int window = 0;  // 0: no window; else sinks + most recent (window - sinks) positions
  int sinks = 4;   // kept forever when a window is set; must be < window
};

// Folds the online-softmax state `from` into `into` (both over head_dim values).
void merge_accum(AttnAccum& into, const AttnAccum& from, int head_dim);

// How a layer's query heads are rotated (to re-place the sinks before the window).
struct RopeSpec {
  const float* inv_freq;  // [n_rot / 2]
  int n_rot;              // 0: no rotation (a NoPE layer)
  bool neox;
  float mscale = 1.0f;    // multiplies cos and sin (LongRoPE's attn_factor)
  // LongRoPE: the table of a sequence whose context (its cache's n_ctx) exceeds long_above.
  const float* inv_freq_long = nullptr;
  int long_above = 0;
  const float* table(int n_ctx) const { return inv_freq_long && n_ctx > long_above ? inv_freq_long : inv_freq; }
};

class KvCache {
 public:
  // layer_window[l] > 0 gives layer l its own window without sinks (Gemma 3's local
  // layers), unless the session's window is smaller. Throws std::bad_alloc when too big to
  // reserve; commits nothing yet.
  static Result<void> validate(const ModelConfig& c, const KvOptions& o);
  KvCache(const ModelConfig& c, const KvOptions& o, int n_ctx, int n_batch, const std::vector<int>& layer_window);

  KvType type() const { return type_; }
  // Every layer has a window: positions never run out (generation can go on indefinitely).
  bool unbounded() const { return unbounded_; }
  // Positions written so far (the next batch starts here).
  int end() const { return end_; }
  // Whether positions pos0 .. pos0 + n - 1 can be stored (no window: they fit n_ctx).
  bool fits(int64_t pos0, int64_t n) const;
  // Start a batch of n positions at pos0 == end(); afterwards end() == pos0 + n. Commits the
  // blocks the batch crosses into first: out_of_memory (and end() unchanged) if it cannot.
  Result<void> begin_batch(int pos0, int n) {
    if (pos0 + n > grow_at_) PLLM_TRY(grow_to(pos0 + n));
    end_ = pos0 + n;
    if (conv_hist_ > 0) conv_lo_ = std::max(conv_lo_, end_ - conv_hist_);  // the batch's rows take these slots
    ++stamp_;
    return {};
  }
  // Keep positions [0, m) for the largest m <= n the cache can resume from exactly (a window
  // may already have overwritten what position n would need; a q4 group already quantised
  // can only be resumed at its start). Returns m. Releases the blocks past the kept positions.
  int truncate(int n);

  // Keys and values of position pos in layer l ([kv_dim] f32 each, keys already rotated).
  // pos must lie in the current batch (begin_batch committed its block).
  void store(int l, int pos, const float* k, const float* v);

  // Attention over what position pos sees in layer l, split for parallel decoding: the n_q
  // query heads q + j * head_dim (j < n_q <= kMaxGroup, rotated for position pos) sharing kv
  // head kv_head fold slice `part` of `n_parts` equal slices of the visible positions into
  // a[j] (attn_accum_init'ed by the caller). Slices merge with merge_accum.
  static constexpr int kMaxGroup = 16;
  // last > pos: the query also sees positions pos + 1 .. last (a bidirectional step's rows,
  // SeqStep::bidirectional; the window still starts where pos's does).
  void attend_part(int l, int pos, int kv_head, int n_q, const float* q, AttnScore scale, const RopeSpec& rope,
                   int part, int n_parts, AttnAccum* a, int last = -1) const;
  // attend_part(l, pos0 + r, kv_head, n_q, q + r * n_q * head_dim, ..., 0, 1, a + r * n_q) for
  // the n_rows consecutive positions pos0 .. pos0 + n_rows - 1 of a prompt (n_rows * n_q <=
  // kMaxGroup), bit for bit, with the keys and values they all see read once for all of them:
  // whole chunks of the online softmax (drivers/online_softmax.h) shared, so every row's chunk
  // boundaries and sums stay its own call's. Plain f16 / f32 caches without a window; the
  // others fall back to one attend_part per row.
  void attend_rows(int l, int pos0, int n_rows, int kv_head, int n_q, const float* q, AttnScore scale,
                   const RopeSpec& rope, AttnAccum* a) const;
  // Positions a query at pos sees in layer l (up to last when last > pos, as attend_part).
  int n_visible(int l, int pos, int last = -1) const;

  // Convolution layers: the conv input row [n_embd] of position pos in layer l. A step writes
  // the rows of its positions >= end() - conv_history() after it has read the rows before its
  // first position; a row may be read while conv_kept() <= pos < end().
  static constexpr int kConvRollback = 64;
  float* conv_row(int l, int pos) { return conv_row_at(l, pos); }
  const float* conv_row(int l, int pos) const { return conv_row_at(l, pos); }
  int conv_history() const { return conv_hist_; }
  int conv_kept() const { return conv_lo_; }

  // Gated DeltaNet layers (ModelConfig::delta_net, qwen35) also keep, beside the convolution's
  // rows, each value head's delta-rule state matrix: ModelConfig::dn_state_floats() f32 per
  // layer, the state after position end() - 1 (a step reads it at its first position unless
  // that is 0, where the state is zeros, and leaves its last row's). It cannot be rewound, so
  // the cache also keeps a checkpoint: the state after the newest position p with p + 1 a
  // multiple of kDeltaCheckpoint (the prefix cache's block, runtime/prefix_cache.h), which the
  // step that computes position p writes. truncate() and the snapshots can then go back to
  // end(), to that checkpoint or to 0. The checkpoint also holds the conv rows before it
  // (delta_checkpoint_conv: conv_taps - 1 rows, positions p + 2 - conv_taps .. p, oldest first,
  // zeros before 0), which the same step writes.
  static constexpr int kDeltaCheckpoint = 64;
  bool has_delta_state() const { return delta_floats_ > 0; }
  float* delta_state(int l) { return delta_at(l, false); }
  float* delta_checkpoint(int l) { return delta_at(l, true); }
  float* delta_checkpoint_conv(int l) { return delta_at(l, true) + delta_floats_; }
  // The step that computed position n - 1 (n a multiple of kDeltaCheckpoint) wrote layer l's
  // checkpoint. The checkpoint is usable once every DeltaNet layer holds the same n (a step
  // cancelled between layers, or a draft that skipped some, leaves them apart: then none is).
  void set_delta_checkpoint(int l, int n);
  int delta_checkpoint_pos() const { return delta_ckpt_; }

  // Positions per KV block, the unit memory is committed and released in.
  static constexpr int kBlock = 64;
  // Bytes the cache reserves (all layers, K and V, scales, tails, each array page-aligned):
  // what it holds once every slot is in use.
  size_t bytes() const { return memory_.size(); }
  // Bytes committed now (whole pages of whole blocks). Equals bytes() where memory cannot
  // grow on demand (ReservedMemory::grows_on_demand()).
  size_t committed_bytes() const;
  int n_layer() const { return int(layers_.size()); }
  // The widest layer's (ModelConfig::kv_dim, head_dim); layer l's own: layer_kv_dim(l).
  int kv_dim() const { return kv_dim_; }
  int head_dim() const { return head_dim_; }
  int layer_kv_dim(int l) const { return layers_[size_t(l)].D; }
  // Layer l reads another layer's keys and values (KV sharing) and stores none.
  bool layer_shared(int l) const { return layers_[size_t(l)].shared; }
  int n_ctx() const { return n_ctx_; }
  // Layer l's window (0: none) and sinks, for backends that mirror the cache.
  int layer_window(int l) const { return layers_[size_t(l)].window; }
  int layer_sinks(int l) const { return layers_[size_t(l)].sinks; }
  // Changes whenever the contents may change (every batch, truncate, import) and is unique
  // across caches: a device mirror that recorded it after its last write is still exact
  // while it is unchanged.
  uint64_t stamp() const { return stamp_; }

  // Snapshots of positions [0, n) in this cache's own storage format (model/kv_snapshot.cpp),
  // per layer (a KV-sharing layer has no part): f32/f16 K rows then V rows; q8 K, V codes then
  // K, V scales; q4 the n / 32 complete group blocks then the f16 K, V rows of the incomplete
  // tail. Only without a session-wide window, and with per-layer windows (Gemma's local layers)
  // only while their rings have not wrapped (a ring has then overwritten the slots a prefix
  // needs; until then the layout is a window-less layer's), and only
  // at an n the cache can resume from exactly: n <= end() and, for q4, a group boundary or
  // inside the newest group (an older group is already quantised; its tail rows are gone).
  // Bytes of the snapshot of [0, n), or why it cannot be taken.
  Result<size_t> prefix_bytes(int n) const;
  // Writes prefix_bytes(n) bytes to out.
  Result<void> export_prefix(int n, uint8_t* out) const;
  // Replaces the cache's contents by a snapshot of [0, n) (len == what prefix_bytes(n)
  // gives for this layout); afterwards end() == n, and the blocks past n are released.
  Result<void> import_prefix(int n, const uint8_t* in, size_t len);

 private:
  struct Layer {
    int sinks = 0;   // S
    int window = 0;  // 0: none
    int ring = 0;    // R, ring slots (a multiple of kKvQ4GroupTokens for q4)
    int recent = 0;  // q4: f16 rows of the newest positions (a multiple of the group, >= group + batch)
    bool conv = false;  // a convolution layer: k is its ring of conv_hist_ f32 rows [conv_dim_]
    bool delta = false;  // a DeltaNet layer too: ds its state, dc the checkpoint ([delta_floats_] f32 each)
    bool shared = false;  // a copy of its source layer's entry (KV sharing): no arrays, no snapshot part
    int D = 0, hd = 0;    // kv_dim and head_dim of the layer
    size_t ds = 0, dc = 0;
    uint8_t* base = nullptr;  // start of memory_ (the offsets below are from it)
    // Offsets in bytes from base; which are used depends on the type.
    size_t k = 0, v = 0;                    // f32/f16/q8 rows [slots][kv_dim]; q4: f16 sinks [S][kv_dim]
    size_t ks = 0, vs = 0;                  // q8 scales [slots][kv_dim / 64]
    size_t tail_k = 0, tail_v = 0;          // q4: f16 rows of the newest positions [recent][kv_dim]
    size_t groups = 0;                      // q4: ring / G group blocks of group_bytes
  };
  // One array of a layer, committed block by block: its slots in use when end() == e are
  // min((e - first) / unit, cap) (rows: unit 1; q4 groups: unit G, a slot is a group block).
  struct Region {
    size_t off = 0;      // page-aligned offset in memory_
    size_t stride = 0;   // bytes per slot
    int cap = 0;         // slots
    int first = 0;       // the position its slot 0 starts at (q4 tail and groups: the sinks)
    int unit = 1;        // positions per slot
    int covered = 0;     // slots committed: whole blocks, at most cap
    int used(int e) const;
    size_t bytes(int slots) const;  // committed bytes for that many slots (whole pages)
  };
  // Commits every region's blocks up to what end() == e uses (never shrinks).
  Result<void> grow_to(int e);
  // Releases every region's blocks past what end() == e uses (never grows).
  void shrink_to(int e);
  // The largest end() the committed blocks hold (begin_batch's quick check).
  void update_grow_at();

  // The oldest position a query at pos sees in the window part (>= sinks).
  static int window_lo(const Layer& L, int pos);
  // The oldest window position still stored when end() == end (what truncate may rely on).
  int oldest_kept(const Layer& L) const;
  size_t group_bytes(size_t D) const;
  // Snapshot bytes of positions [0, n) of one layer (no window), of every layer.
  size_t layer_prefix_bytes(const Layer& L, int n) const;
  size_t payload_bytes(int n) const;
  // Whether every windowed layer holds positions [0, e) in slots [0, e) (no sinks, no wrap).
  bool windows_in_place(int e) const;
  // q4: the f16 rows every attention layer keeps of the newest positions.
  int q4_recent() const {
    for (const Layer& L : layers_)
      if (!L.conv && !L.shared) return L.recent;
    return 0;
  }
  // Whether the convolution layers can resume at n (rows [n - taps + 1, n) still held).
  bool conv_resumable(int n) const {
    if (delta_floats_ > 0 && n != 0 && n != end_ && n != delta_ckpt_) return false;  // no state there
    if (delta_floats_ > 0 && n == delta_ckpt_) return true;                            // its rows are beside it
    return conv_hist_ == 0 || n == 0 || std::max(0, n - conv_taps_ + 1) >= conv_lo_;
  }
  float* delta_at(int l, bool ckpt) const {
    const Layer& L = layers_[size_t(l)];
    return reinterpret_cast<float*>(L.base + (ckpt ? L.dc : L.ds));
  }
  // Copies the checkpoint's conv rows into the ring (truncate) or the ring's into it (import).
  void copy_checkpoint_conv(int l, int n, bool to_ring);
  float* conv_row_at(int l, int pos) const {
    const Layer& L = layers_[size_t(l)];
    return reinterpret_cast<float*>(L.base + L.k) + size_t(pos % conv_hist_) * size_t(conv_dim_);
  }
  // The cache's bytes that hold the snapshot of [0, n) (no window), every layer's in
  // snapshot order: what export_prefix copies out and import_prefix copies back in.
  // importing: the spans import_prefix(n) writes (the live DeltaNet state, whatever end() is now).
  std::vector<std::span<uint8_t>> prefix_spans(int n, bool importing = false) const;
  // q4: what a query at pos reads from the f16 rows (positions >= this) rather than from
  // quantised groups: the group it is in is incomplete for it, whatever the batch stored.
  static int q4_tail_for(const Layer& L, int pos);
  // Positions [lo, hi), all in one storage area, for n_q query heads (q + j * head_dim, a[j]).
  void attend_range(const Layer& L, int pos, int lo, int hi, int kv_head, int n_q, const float* q, AttnScore scale,
                    AttnAccum* a) const;

  KvType type_;
  int kv_dim_, head_dim_, n_ctx_;
  bool unbounded_ = false;  // any windowed layer: positions are not limited by n_ctx
  int end_ = 0;
  int conv_dim_ = 0, conv_taps_ = 0, conv_hist_ = 0;  // convolution layers: row width, taps, ring rows
  int conv_lo_ = 0;                                   // the oldest position whose conv rows are held
  size_t delta_floats_ = 0;                           // DeltaNet state per layer (0: none)
  int delta_ckpt_ = -1;                               // the position every checkpoint holds, or -1
  std::vector<int> layer_ckpt_;                       // [n_layer] what each DeltaNet layer's holds (-1: none)
  uint64_t stamp_;  // the cache's id (high 32 bits) and a change count
  std::vector<Layer> layers_;
  std::vector<Region> regions_;  // every layer's arrays
  int grow_at_ = 0;              // begin_batch commits when a batch ends past this
  ReservedMemory memory_;
  std::vector<float> scratch_;  // q4 flush: one value row as f32
};

}  // namespace pllm
