#include "runtime/image_rows.h"

#include <string>

namespace pllm {

Result<void> ImageRows::add(std::shared_ptr<ImageTile> tile) {
  if (!tile || tile->ids.empty() || !tile->encode) return make_error(Status::invalid_argument, "empty image tile");
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_id_.find(tile->ids[0]); it != by_id_.end()) {
    const ImageTile* known = it->second.first;
    if (it->second.second == 0 && known->ids == tile->ids && known->bidirectional == tile->bidirectional) {
      touch(tiles_.at(known));
      return {};  // the same image again
    }
  }
  for (int32_t id : tile->ids) {
    if (id >= 0 || id < kMinImageRowId)
      return make_error(Status::invalid_argument, "image row ids lie in [-2^30, -1]");
    if (by_id_.count(id)) return make_error(Status::internal, "image row id collision: send the image again");
  }
  const ImageTile* key = tile.get();
  for (size_t r = 0; r < tile->ids.size(); ++r) by_id_[tile->ids[r]] = {key, int(r)};
  lru_.push_front(key);
  tiles_.emplace(key, Entry{std::move(tile), {}, {}, lru_.begin()});
  evict();
  return {};
}

void ImageRows::touch(Entry& e) { lru_.splice(lru_.begin(), lru_, e.lru); }

void ImageRows::evict() {
  while (tiles_.size() > kMaxTiles) {
    const ImageTile* old = lru_.back();
    lru_.pop_back();
    for (int32_t id : old->ids) by_id_.erase(id);
    tiles_.erase(old);
  }
}

Result<ImageRun> ImageRows::run_at(std::span<const int32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_id_.find(ids[0]);
  if (it == by_id_.end())
    return make_error(Status::invalid_argument, "an image row (id " + std::to_string(ids[0]) +
                                                    ") this session does not know: the image was not given to it, or "
                                                    "was forgotten since; send the image again");
  Entry& e = tiles_.at(it->second.first);
  touch(e);
  ImageRun run{e.tile, it->second.second, 0};
  const auto& tids = e.tile->ids;
  while (size_t(run.n) < ids.size() && size_t(run.first_row + run.n) < tids.size() &&
         ids[size_t(run.n)] == tids[size_t(run.first_row + run.n)])
    ++run.n;
  return run;
}

ImageRows::Embeddings ImageRows::embeddings(const ImageTile& tile, ThreadPool& pool) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = tiles_.find(&tile);
  if (it == tiles_.end()) return make_error(Status::invalid_argument, "image tile forgotten: send the image again");
  if (it->second.embd) return it->second.embd;
  if (it->second.pending.valid()) {  // another caller is encoding it
    std::shared_future<Embeddings> wait = it->second.pending;
    lock.unlock();
    return wait.get();
  }
  std::promise<Embeddings> done;
  it->second.pending = done.get_future().share();
  const auto encode = it->second.tile->encode;  // a copy: keeps what it captured alive
  ++encodes_;
  lock.unlock();  // encoding takes long; lookups go on meanwhile
  auto v = encode(pool);
  Embeddings r = v.ok() ? Embeddings(std::make_shared<const std::vector<float>>(std::move(*v))) : Embeddings(v.error());
  lock.lock();
  it = tiles_.find(&tile);
  if (it != tiles_.end()) {
    it->second.pending = {};
    if (r.ok()) {
      it->second.embd = *r;
      it->second.tile->encode = nullptr;  // frees the preprocessed image it held
    }
  }
  done.set_value(r);
  return r;
}

size_t ImageRows::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tiles_.size();
}

bool ImageRows::contains(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_id_.count(id) > 0;
}

int64_t ImageRows::encodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return encodes_;
}

}  // namespace pllm
