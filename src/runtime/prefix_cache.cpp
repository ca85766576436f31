#include "runtime/prefix_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "base/checked.h"
#include "base/hash.h"
#include "model/kv_snapshot.h"

namespace pllm {
namespace {

// Files larger than this are not snapshots this build wrote (a 32K-token f32 cache of a
// 70B model would still fit); refusing them keeps a damaged size from driving an allocation.
constexpr uint64_t kMaxFileBytes = uint64_t(16) << 30;
// Bytes the writer queue may hold before new insertions skip the disk (RAM still gets them).
constexpr size_t kMaxQueuedBytes = size_t(512) << 20;
// A temporary file this old was left by a writer that died; a live one renames within seconds.
constexpr int64_t kStaleTmpSeconds = 3600;

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

// Whether snapshot bytes hold exactly these tokens (header field n and the token list);
// cheap enough for every RAM hit, unlike the full checksum.
bool holds_tokens(const std::vector<uint8_t>& s, std::span<const int32_t> tokens) {
  const auto need = checked_add(kKvSnapshotHeaderBytes, uint64_t(tokens.size()) * 4);
  if (!need || s.size() < *need) return false;
  uint32_t n;
  std::memcpy(&n, s.data() + 36, 4);
  return n == tokens.size() && std::memcmp(s.data() + kKvSnapshotHeaderBytes, tokens.data(), tokens.size() * 4) == 0;
}

int64_t now_s() { return int64_t(std::time(nullptr)); }

}  // namespace

Result<std::shared_ptr<PrefixCache>> PrefixCache::create(uint64_t model_id, const PrefixCacheParams& p, Warn warn) {
  if (p.ttl_seconds < 0) return make_error(Status::invalid_argument, "prefix cache TTL must be >= 0");
  if (!p.dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(p.dir, ec);
    if (ec || access(p.dir.c_str(), W_OK | X_OK) != 0)
      return make_error(Status::io_error, "prefix cache directory '" + p.dir + "' is not writable" +
                                              (ec ? ": " + ec.message() : std::string()));
  }
  if (!warn) warn = [](const std::string& m) { std::fprintf(stderr, "pocketllm: prefix cache: %s\n", m.c_str()); };
  try {
    return std::shared_ptr<PrefixCache>(new PrefixCache(model_id, p, std::move(warn)));
  } catch (const std::exception& e) {  // thread creation
    return make_error(Status::internal, std::string("prefix cache: ") + e.what());
  }
}

PrefixCache::PrefixCache(uint64_t model_id, const PrefixCacheParams& p, Warn warn)
    : model_id_(model_id), params_(p), warn_(std::move(warn)) {
  if (!params_.dir.empty()) writer_ = std::thread([this] { writer_loop(); });
}

PrefixCache::~PrefixCache() {
  {
    std::lock_guard lk(qmu_);
    stop_ = true;
  }
  qcv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

uint64_t PrefixCache::key(KvType type, std::span<const int32_t> tokens, size_t n_blocks, uint32_t compute_tag) const {
  Hasher seed(0x50524658ull);
  seed.update_u64(model_id_);
  seed.update_u64(uint64_t(type));
  seed.update_u64(kBlock);
  if (compute_tag != 0) seed.update_u64(0x4143540000000000ull | compute_tag);  // exact mode keeps its old keys
  uint64_t k = seed.digest();
  for (size_t b = 0; b < n_blocks; ++b) {
    Hasher h(k);
    h.update(tokens.data() + b * kBlock, kBlock * sizeof(int32_t));
    k = h.digest();
  }
  return k;
}

std::string PrefixCache::path_of(uint64_t key) const { return params_.dir + "/" + hex16(key) + ".kv"; }

void PrefixCache::put_ram(uint64_t key, std::shared_ptr<const std::vector<uint8_t>> bytes) {
  const size_t size = bytes->size();
  auto it = ram_.find(key);
  if (it != ram_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  if (size > params_.ram_bytes) return;
  while (ram_used_ + size > params_.ram_bytes && !lru_.empty()) {
    auto victim = ram_.find(lru_.back());
    ram_used_ -= victim->second.bytes->size();
    ram_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  ram_.emplace(key, Entry{std::move(bytes), lru_.begin()});
  ram_used_ += size;
}

PrefixCache::Hit PrefixCache::lookup(KvType type, std::span<const int32_t> tokens, size_t min_tokens,
                                     size_t max_tokens, uint32_t compute_tag) {
  const size_t max_blocks = std::min(max_tokens, tokens.size()) / kBlock;
  const size_t min_blocks = min_tokens / kBlock;  // a hit must cover more than min_tokens
  if (max_blocks == 0 || max_blocks * kBlock <= min_tokens) return {};
  std::vector<uint64_t> keys(max_blocks + 1);
  keys[0] = key(type, tokens, 0, compute_tag);
  for (size_t b = 1; b <= max_blocks; ++b) {  // the chain, one block at a time
    Hasher h(keys[b - 1]);
    h.update(tokens.data() + (b - 1) * kBlock, kBlock * sizeof(int32_t));
    keys[b] = h.digest();
  }
  {
    std::lock_guard lk(mu_);
    for (size_t b = max_blocks; b > min_blocks; --b) {
      auto it = ram_.find(keys[b]);
      if (it == ram_.end() || !holds_tokens(*it->second.bytes, tokens.first(b * kBlock))) continue;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++stats_.ram_hits;
      return {it->second.bytes, b * kBlock, keys[b]};
    }
    ++stats_.ram_misses;
  }
  if (params_.dir.empty()) return {};
  for (size_t b = max_blocks; b > min_blocks; --b) {
    auto bytes = load_file(keys[b], type, tokens.first(b * kBlock));
    if (!bytes) continue;
    std::lock_guard lk(mu_);
    ++stats_.disk_hits;
    put_ram(keys[b], bytes);
    return {bytes, b * kBlock, keys[b]};
  }
  std::lock_guard lk(mu_);
  ++stats_.disk_misses;
  return {};
}

bool PrefixCache::contains(KvType type, std::span<const int32_t> tokens, uint32_t compute_tag) {
  const uint64_t k = key(type, tokens, tokens.size() / kBlock, compute_tag);
  std::lock_guard lk(mu_);
  return ram_.count(k) != 0;
}

void PrefixCache::insert(KvType type, std::span<const int32_t> tokens, std::vector<uint8_t> snapshot,
                         uint32_t compute_tag) {
  if (tokens.empty() || tokens.size() % kBlock != 0) return;
  const uint64_t k = key(type, tokens, tokens.size() / kBlock, compute_tag);
  auto bytes = std::make_shared<const std::vector<uint8_t>>(std::move(snapshot));
  {
    std::lock_guard lk(mu_);
    ++stats_.inserts;
    put_ram(k, bytes);
  }
  if (params_.dir.empty()) return;
  {
    std::lock_guard lk(qmu_);
    if (queued_bytes_ + bytes->size() > kMaxQueuedBytes) return;  // the disk is behind: skip, never wait
    queued_bytes_ += bytes->size();
    queue_.push_back(Job{k, std::move(bytes)});
  }
  qcv_.notify_one();
}

void PrefixCache::drop(uint64_t key, const std::string& why) {
  {
    std::lock_guard lk(mu_);
    auto it = ram_.find(key);
    if (it != ram_.end()) {
      ram_used_ -= it->second.bytes->size();
      lru_.erase(it->second.lru);
      ram_.erase(it);
    }
  }
  if (!params_.dir.empty()) unlink(path_of(key).c_str());
  warn_("dropped entry " + hex16(key) + ": " + why);
}

void PrefixCache::count_tokens(size_t restored, size_t computed) {
  std::lock_guard lk(mu_);
  stats_.restored_tokens += restored;
  stats_.computed_tokens += computed;
}

void PrefixCache::flush() {
  std::unique_lock lk(qmu_);
  idle_cv_.wait(lk, [this] { return queue_.empty() && !busy_; });
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard lk(mu_);
  PrefixCacheStats s = stats_;
  s.ram_entries = ram_.size();
  s.ram_bytes = ram_used_;
  return s;
}

std::shared_ptr<const std::vector<uint8_t>> PrefixCache::load_file(uint64_t key, KvType type,
                                                                   std::span<const int32_t> prefix) {
  const std::string path = path_of(key);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;  // a miss (or another process just evicted it)
  auto bad = [&](const std::string& why) -> std::shared_ptr<const std::vector<uint8_t>> {
    close(fd);
    unlink(path.c_str());
    {
      std::lock_guard lk(mu_);
      ++stats_.disk_bad_files;
    }
    warn_("ignored and deleted " + path + ": " + why);
    return nullptr;
  };
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < 0) return bad("cannot stat");
  if (params_.ttl_seconds > 0 && now_s() - int64_t(st.st_mtime) > params_.ttl_seconds) {
    close(fd);
    unlink(path.c_str());  // expired: not an error
    return nullptr;
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size > kMaxFileBytes) return bad("file of " + std::to_string(size) + " bytes is too large");
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  try {
    bytes->resize(size_t(size));
  } catch (const std::bad_alloc&) {
    close(fd);
    return nullptr;
  }
  size_t got = 0;
  while (got < bytes->size()) {
    const ssize_t r = read(fd, bytes->data() + got, bytes->size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return bad("short read");
    got += size_t(r);
  }
  auto view = parse_kv_snapshot(*bytes);
  if (!view.ok()) return bad(view.error().message);
  if (view->model_id != model_id_) return bad("written for another model");
  if (view->type != type) return bad(std::string("holds a ") + kv_type_name(view->type) + " cache");
  if (!holds_tokens(*bytes, prefix)) return bad("holds other tokens than its name says");
  close(fd);
  utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used: last to be evicted
  return bytes;
}

void PrefixCache::writer_loop() {
  // Background work: yield the cores to prefill and decode (Linux: per-thread nice).
  setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 10);
  for (;;) {
    std::unique_lock lk(qmu_);
    qcv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, everything written
    Job j = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    write_file(j);
    trim_dir();
    lk.lock();
    queued_bytes_ -= j.bytes->size();
    busy_ = false;
    idle_cv_.notify_all();
  }
}

void PrefixCache::write_file(const Job& j) {
  const std::string path = path_of(j.key);
  if (access(path.c_str(), F_OK) == 0) {  // content-addressed: already there (maybe another process)
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    return;
  }
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = params_.dir + "/.tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
                          hex16(j.key);
  auto fail = [&](const char* what) {
    const std::string msg = std::string(what) + " " + tmp + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    {
      std::lock_guard lk(mu_);
      ++stats_.disk_write_errors;
    }
    warn_(msg);
  };
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot create");
  size_t done = 0;
  while (done < j.bytes->size()) {
    const ssize_t w = write(fd, j.bytes->data() + done, j.bytes->size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return fail("cannot write");
    }
    done += size_t(w);
  }
  if (fsync(fd) != 0) {
    close(fd);
    return fail("cannot fsync");
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename");
  // Make the rename itself durable.
  const int dfd = open(params_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  std::lock_guard lk(mu_);
  ++stats_.disk_writes;
  stats_.disk_write_bytes += j.bytes->size();
}

void PrefixCache::trim_dir() {
  DIR* d = opendir(params_.dir.c_str());
  if (!d) return;
  struct File {
    int64_t mtime;  // ns: writes within one second still order
    uint64_t size;
    std::string path;
  };
  std::vector<File> files;
  const int64_t now = now_s();
  uint64_t evicted = 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = params_.dir + "/" + name;
    const bool entry = name.size() == 19 && name.compare(16, 3, ".kv") == 0;
    const bool tmp = name.rfind(".tmp-", 0) == 0;
    if (!entry && !tmp) continue;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // gone meanwhile
    if (tmp) {
      if (now - int64_t(st.st_mtime) > kStaleTmpSeconds) unlink(path.c_str());
      continue;
    }
    if (params_.ttl_seconds > 0 && now - int64_t(st.st_mtime) > params_.ttl_seconds) {
      if (unlink(path.c_str()) == 0) ++evicted;
      continue;
    }
    files.push_back({int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, uint64_t(st.st_size), path});
  }
  closedir(d);
  uint64_t total = 0;
  for (const File& f : files) total += f.size;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.mtime < b.mtime; });
  for (const File& f : files) {
    if (total <= params_.disk_bytes) break;
    if (unlink(f.path.c_str()) == 0) ++evicted;  // another process may have removed it first
    total -= f.size;
  }
  if (evicted) {
    std::lock_guard lk(mu_);
    stats_.disk_evictions += evicted;
  }
}

}  // namespace pllm
