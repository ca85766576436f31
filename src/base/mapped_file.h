// A read-only memory mapping of a whole file, or a heap copy of bytes standing in for one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/result.h"

namespace pllm {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  // A copy of `bytes` under the name `path` (used in error messages), never touching disk:
  // for fuzzers and tests. The copy is exactly bytes.size() long, so AddressSanitizer
  // catches a read one byte past the end, which a page-rounded mapping would hide. It is
  // 64-byte aligned, so tensor data at aligned offsets is as aligned as in a mapping.
  static std::shared_ptr<MappedFile> from_bytes(std::span<const uint8_t> bytes, std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the resident pages lying wholly inside [p, p + n) (madvise DONTNEED): for data
  // copied elsewhere (repacked weights) so it is not counted twice. The mapping stays
  // valid; touching those bytes again reads them back from the file.
  // (No-op for from_bytes copies.)
  void release(const uint8_t* p, size_t n) const;
  // Asks the kernel to start reading the pages under [p, p + n) (madvise WILLNEED) of a mapping
  // whose pages may not be resident: rows about to be read one by one (Gemma 4's per-layer table)
  // then arrive as reads issued together instead of one page fault after another. Advisory:
  // anything else (a heap copy, no mapping there) is left as it is.
  static void will_need(const uint8_t* p, size_t n);

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool heap_ = false;  // from_bytes: data_ is an aligned new[], not a mapping
  std::string path_;
};

}  // namespace pllm
