#include "base/reserved_memory.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "base/checked.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#define PLLM_RESERVE_MMAP 1
#else
#define PLLM_RESERVE_MMAP 0
#endif

namespace pllm {

size_t ReservedMemory::page_size() {
#if PLLM_RESERVE_MMAP
  static const size_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? size_t(p) : size_t(4096);
  }();
  return page;
#else
  return 4096;
#endif
}

bool ReservedMemory::grows_on_demand() { return PLLM_RESERVE_MMAP != 0; }

ReservedMemory::ReservedMemory(size_t bytes) {
  if (bytes == 0) return;
  const auto rounded = checked_align_up(bytes, page_size());
  if (!rounded) throw std::bad_alloc();
#if PLLM_RESERVE_MMAP
  void* p = ::mmap(nullptr, size_t(*rounded), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#if defined(MADV_NOHUGEPAGE)
  ::madvise(p, size_t(*rounded), MADV_NOHUGEPAGE);  // advisory: THP may be compiled out
#endif
#else
  void* p = std::aligned_alloc(page_size(), size_t(*rounded));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, size_t(*rounded));
#endif
  base_ = static_cast<uint8_t*>(p);
  size_ = size_t(*rounded);
}

ReservedMemory::~ReservedMemory() { free_all(); }

ReservedMemory::ReservedMemory(ReservedMemory&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

ReservedMemory& ReservedMemory::operator=(ReservedMemory&& o) noexcept {
  if (this != &o) {
    free_all();
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void ReservedMemory::free_all() {
  if (!base_) return;
#if PLLM_RESERVE_MMAP
  ::munmap(base_, size_);
#else
  std::free(base_);
#endif
  base_ = nullptr;
  size_ = 0;
}

bool ReservedMemory::commit(size_t off, size_t len) {
  if (len == 0) return true;
#if PLLM_RESERVE_MMAP
  uint8_t* p = base_ + off;
#if defined(MADV_POPULATE_WRITE)
  // Kernels before 5.14 answer EINVAL: remember it and touch the pages instead.
  static std::atomic<bool> populate_works{true};
  if (populate_works.load(std::memory_order_relaxed)) {
    if (::madvise(p, len, MADV_POPULATE_WRITE) == 0) return true;
    if (errno != EINVAL) return false;  // ENOMEM, EHWPOISON, ...: no memory for it
    populate_works.store(false, std::memory_order_relaxed);
  }
#endif
  // The range holds no data (see the header), so writing a zero changes nothing it reads.
  const size_t page = page_size();
  for (size_t i = 0; i < len; i += page) static_cast<volatile uint8_t*>(p)[i] = 0;
  return true;
#else
  (void)off;
  return true;
#endif
}

void ReservedMemory::release(size_t off, size_t len) {
  if (len == 0) return;
#if PLLM_RESERVE_MMAP
  // Cannot fail on a range of this mapping; if it did, the pages would just stay resident.
  ::madvise(base_ + off, len, MADV_DONTNEED);
#else
  (void)off;
#endif
}

}  // namespace pllm
