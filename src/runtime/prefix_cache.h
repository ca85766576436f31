// A content-addressed cache of KV snapshots (model/kv_snapshot.h) of block-aligned prompt
// prefixes, so a prompt that starts like an earlier one (a system prompt, a document, the
// earlier turns of a chat) restores that prefix instead of recomputing it.
//
// Key of the prefix tokens[0, k * kBlock): a hash chain over its blocks of kBlock tokens,
// seeded with the model identity and KV type, so the key of block k extends the key of
// block k - 1 and a lookup walks the prompt once. A snapshot also stores its tokens, which
// a lookup compares, so a hash collision can only cost a miss.
//
// L1: snapshots in RAM, least recently used evicted first within ram_bytes.
// L2 (when dir is set): one file per entry, "<key hex>.kv", holding the snapshot bytes
// (which carry magic, format version, model identity and a checksum). A single writer
// thread takes insertions from a queue (a generate call never waits on the disk), writes
// "<dir>/.tmp-<pid>-<n>", fsyncs and renames it into place, so readers, including other
// processes, see a whole file or none. After each write the directory is trimmed: files
// older than ttl_seconds go, then the least recently used (mtime; a hit touches it) until
// the total is within disk_bytes. A file that fails to parse or does not match is reported
// through the warning callback, deleted and counted; it never fails a generation.
//
// Thread-safe: one cache may serve several sessions of the same model at once.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "model/kv_cache.h"

namespace pllm {

struct PrefixCacheParams {
  size_t ram_bytes = size_t(256) << 20;   // L1 budget; 0: no RAM tier
  std::string dir;                        // L2 directory (created if missing); empty: no disk tier
  uint64_t disk_bytes = uint64_t(1) << 30;
  int64_t ttl_seconds = 7 * 24 * 3600;    // 0: no expiry
};

struct PrefixCacheStats {
  uint64_t ram_hits = 0, ram_misses = 0;
  uint64_t disk_hits = 0, disk_misses = 0;
  uint64_t inserts = 0;          // snapshots offered to the cache
  uint64_t ram_entries = 0, ram_bytes = 0;
  uint64_t disk_writes = 0, disk_write_bytes = 0, disk_evictions = 0;
  uint64_t disk_bad_files = 0;   // corrupt, truncated, foreign or old files deleted
  uint64_t disk_write_errors = 0;
  uint64_t restored_tokens = 0;  // prompt tokens restored from the cache
  uint64_t computed_tokens = 0;  // prompt tokens computed by prefill
};

class PrefixCache {
 public:
  static constexpr int kBlock = 64;
  using Warn = std::function<void(const std::string&)>;  // default: one line on stderr

  static Result<std::shared_ptr<PrefixCache>> create(uint64_t model_id, const PrefixCacheParams& p, Warn warn = {});
  ~PrefixCache();  // writes what is still queued, then stops the writer
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Hit {
    std::shared_ptr<const std::vector<uint8_t>> snapshot;
    size_t n_tokens = 0;
    uint64_t key = 0;
  };
  // The longest cached block-aligned prefix of tokens with min_tokens < n <= max_tokens
  // (RAM first, then disk); snapshot null when there is none. A returned snapshot has been
  // checksummed (when read from disk) or was made by this process.
  // compute_tag (every call): how the KV was computed, part of the key so that sessions in
  // different activation modes never share entries (Session::compute_tag; 0 = exact).
  Hit lookup(KvType type, std::span<const int32_t> tokens, size_t min_tokens, size_t max_tokens,
             uint32_t compute_tag = 0);
  // Whether tokens (a whole number of blocks) is cached in RAM (disk: not checked).
  bool contains(KvType type, std::span<const int32_t> tokens, uint32_t compute_tag = 0);
  // Adds the snapshot of tokens (a whole number of blocks) to RAM and queues it for disk.
  void insert(KvType type, std::span<const int32_t> tokens, std::vector<uint8_t> snapshot, uint32_t compute_tag = 0);
  // Forgets an entry that failed to restore (and deletes its file).
  void drop(uint64_t key, const std::string& why);
  void count_tokens(size_t restored, size_t computed);
  // Blocks until the writer has finished everything queued so far.
  void flush();
  PrefixCacheStats stats() const;
  uint64_t model_id() const { return model_id_; }

  // Key of tokens[0, n_blocks * kBlock).
  uint64_t key(KvType type, std::span<const int32_t> tokens, size_t n_blocks, uint32_t compute_tag = 0) const;

 private:
  PrefixCache(uint64_t model_id, const PrefixCacheParams& p, Warn warn);
  struct Entry {
    std::shared_ptr<const std::vector<uint8_t>> bytes;
    std::list<uint64_t>::iterator lru;
  };
  struct Job {
    uint64_t key;
    std::shared_ptr<const std::vector<uint8_t>> bytes;
  };
  std::string path_of(uint64_t key) const;
  // RAM: under mu_.
  void put_ram(uint64_t key, std::shared_ptr<const std::vector<uint8_t>> bytes);
  // Disk: reads, checks and returns the file of key, or null (deleting a bad file).
  std::shared_ptr<const std::vector<uint8_t>> load_file(uint64_t key, KvType type, std::span<const int32_t> prefix);
  void writer_loop();
  void write_file(const Job& j);
  void trim_dir();

  const uint64_t model_id_;
  const PrefixCacheParams params_;
  const Warn warn_;

  mutable std::mutex mu_;  // L1 and the counters
  std::unordered_map<uint64_t, Entry> ram_;
  std::list<uint64_t> lru_;  // front: most recent
  size_t ram_used_ = 0;
  PrefixCacheStats stats_;

  std::mutex qmu_;  // the writer's queue
  std::condition_variable qcv_, idle_cv_;
  std::deque<Job> queue_;
  size_t queued_bytes_ = 0;
  bool busy_ = false, stop_ = false;
  std::thread writer_;
};

}  // namespace pllm
