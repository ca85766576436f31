// Address space reserved up front and backed by memory only where it is used (the KV cache,
// which must not cost its full context until a sequence fills it).
//
// Linux (and Android): an anonymous private mapping with MAP_NORESERVE. Nothing is memset:
// untouched pages read as zero and take no memory. commit() faults a page range in at once
// (MADV_POPULATE_WRITE, Linux 5.14+; older kernels: one write per page), so the pages are not
// faulted one by one inside a kernel; release() gives pages back (MADV_DONTNEED: they read
// as zero again). Transparent huge pages are refused for the mapping (MADV_NOHUGEPAGE): in
// THP "always" mode a first touch would otherwise commit 2 MiB at once.
//
// Elsewhere: one zeroed heap allocation; commit() and release() do nothing, so memory is the
// whole size from the start (the behaviour before reservation existed).
#pragma once
#include <cstddef>
#include <cstdint>

namespace pllm {

class ReservedMemory {
 public:
  ReservedMemory() = default;
  // Reserves `bytes` rounded up to whole pages; throws std::bad_alloc when that fails.
  explicit ReservedMemory(size_t bytes);
  ~ReservedMemory();
  ReservedMemory(ReservedMemory&& o) noexcept;
  ReservedMemory& operator=(ReservedMemory&& o) noexcept;
  ReservedMemory(const ReservedMemory&) = delete;
  ReservedMemory& operator=(const ReservedMemory&) = delete;

  // The granularity of commit() and release(): offsets and lengths are multiples of it.
  static size_t page_size();
  // Whether commit() and release() really change what the process holds (false: a plain
  // allocation that holds everything from the start).
  static bool grows_on_demand();

  uint8_t* data() { return base_; }
  const uint8_t* data() const { return base_; }
  size_t size() const { return size_; }

  // Makes [off, off + len) resident and writable now. The range must not hold data (pages
  // never committed or released since): the fallback for old kernels writes a zero to each
  // page. False when the system has no memory for it (nothing is allocated on the heap).
  bool commit(size_t off, size_t len);
  // Gives [off, off + len) back to the system; its contents are unspecified afterwards
  // (zero on Linux) until written again.
  void release(size_t off, size_t len);

 private:
  void free_all();
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pllm
