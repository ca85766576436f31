// A read-only memory mapping of a whole file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"

namespace pllm {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the resident pages lying wholly inside [p, p + n) (madvise DONTNEED): for data
  // copied elsewhere (repacked weights) so it is not counted twice. The mapping stays
  // valid; touching those bytes again reads them back from the file.
  void release(const uint8_t* p, size_t n) const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

}  // namespace pllm
