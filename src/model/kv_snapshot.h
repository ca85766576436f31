// The serialized form of a KV-cache prefix (positions [0, n) and the n tokens that produced
// them): what the prefix cache keeps in RAM and writes to disk, and what a session restores
// instead of recomputing the prefix.
//
// Layout (little-endian; 64-byte header, then the payload):
//   0  magic "PLLMKVSN"          8  u32 format version   12 u32 KV type (KvType)
//   16 u64 model identity        24 u32 n_layer          28 u32 kv_dim
//   32 u32 head_dim              36 u32 n positions      40 u32 q4 group tokens
//   44 u32 zero                  48 u64 payload bytes    56 u64 checksum
//   64 payload: n int32 tokens, then KvCache::export_prefix's bytes
// The checksum (base/hash.h) covers header bytes [0, 56) and the payload, so any flipped bit,
// a truncation or a header edited to pass the other checks is caught.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "model/kv_cache.h"

namespace pllm {

// Bump when the payload layout of any KV type changes: older files are then refused.
constexpr uint32_t kKvSnapshotVersion = 1;
constexpr size_t kKvSnapshotHeaderBytes = 64;

struct KvSnapshotView {
  uint32_t version = 0;
  KvType type = KvType::f16;
  uint64_t model_id = 0;
  int n_layer = 0, kv_dim = 0, head_dim = 0, n_pos = 0;
  std::span<const uint8_t> tokens;  // n_pos int32 (unaligned: copy out with token_ids())
  std::span<const uint8_t> kv;      // KvCache::export_prefix bytes
  std::vector<int32_t> token_ids() const;
};

// Checks magic, version, sizes (checked arithmetic) and checksum; the view points into bytes.
// verify_checksum = false only for bytes this process made or already verified (the prefix
// cache's RAM tier): the checksum pass is most of a restore's cost.
Result<KvSnapshotView> parse_kv_snapshot(std::span<const uint8_t> bytes, bool verify_checksum = true);
// Snapshot of the first tokens.size() positions of kv (which must hold exactly those tokens).
Result<std::vector<uint8_t>> make_kv_snapshot(const KvCache& kv, uint64_t model_id, std::span<const int32_t> tokens);
// Replaces kv's contents with the snapshot after checking that it was taken with the same
// model, KV type and shapes.
Result<void> restore_kv_snapshot(KvCache& kv, uint64_t model_id, const KvSnapshotView& s);

}  // namespace pllm
