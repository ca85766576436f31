// Image rows in a session's history: negative ids standing for the rows of an encoded image
// tile (vision/image_prompt.h makes them from the image's pixels, so the same photo gets the
// same ids and the prefix cache, keyed on ids, recognises it). The store maps each id to its
// tile and row. A tile's embeddings are computed the first time its rows run, on the engine's
// threads, and kept; rows restored from the prefix cache never run, so a cached image is
// never encoded again.
#pragma once
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"

namespace pllm {

// Where an image goes in a prompt's text: llama.cpp's default media marker, so prompts move
// between the two engines unchanged.
inline constexpr std::string_view kImageMarker = "<__media__>";

// Image row ids lie in [kMinImageRowId, -1].
inline constexpr int32_t kMinImageRowId = -(int32_t(1) << 30);

struct ImageTile {
  std::vector<int32_t> ids;    // its rows' history ids (negative), in order
  bool bidirectional = false;  // its rows see each other both ways (gemma3): they run as one step
  // Computes the rows' embeddings (ids.size() * n_embd floats) on the pool; called once.
  std::function<Result<std::vector<float>>(ThreadPool&)> encode;
};

// A run of one tile's rows at the start of a token span.
struct ImageRun {
  std::shared_ptr<const ImageTile> tile;
  int first_row = 0;  // the tile row of the span's first id
  int n = 0;          // ids of the span that are the tile's rows first_row, first_row + 1, ...
};

class ImageRows {
 public:
  // Tiles whose rows ran least recently are forgotten beyond this many (an image asked about
  // again after that is encoded again, or refused if its ids are all that is left).
  static constexpr size_t kMaxTiles = 256;

  // Registers a tile (again: keeps the one already known). An id already standing for another
  // tile's row is an error (2^30 ids: it does not happen by chance).
  Result<void> add(std::shared_ptr<ImageTile> tile);
  // The run of one tile's rows that ids (ids[0] < 0) begins with; an unknown id is an error.
  Result<ImageRun> run_at(std::span<const int32_t> ids);
  // The tile's embeddings, encoding it on the pool the first time (once: a caller that comes
  // while another encodes waits for that result; a failed encode is tried again next time).
  Result<std::shared_ptr<const std::vector<float>>> embeddings(const ImageTile& tile, ThreadPool& pool);
  size_t size() const;
  // Whether id is a row of a known tile.
  bool contains(int32_t id) const;
  // Tiles encoded so far (a tile forgotten and given again counts again).
  int64_t encodes() const;

 private:
  using Embeddings = Result<std::shared_ptr<const std::vector<float>>>;
  struct Entry {
    std::shared_ptr<ImageTile> tile;
    std::shared_ptr<const std::vector<float>> embd;  // null until encoded
    // While one caller encodes, the others wait for its result here (encoded once).
    std::shared_future<Embeddings> pending;
    std::list<const ImageTile*>::iterator lru;
  };
  void touch(Entry& e);
  void evict();

  mutable std::mutex mu_;
  std::unordered_map<const ImageTile*, Entry> tiles_;
  std::unordered_map<int32_t, std::pair<const ImageTile*, int>> by_id_;  // id -> tile, row
  std::list<const ImageTile*> lru_;  // most recent first
  int64_t encodes_ = 0;
};

}  // namespace pllm
