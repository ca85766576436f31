// A fixed-size, zero-initialised array (scratch, KV cache, repacked weights): 64-byte (cache
// line) aligned, page aligned once it spans a page, so large buffers start on their own pages.
// Buffers of 2 MiB or more are 2 MiB aligned and asked for transparent huge pages (Linux and
// Android default to THP "madvise" mode): weights and KV are streamed every token, and 4 KiB
// pages stop the hardware prefetcher at every page boundary and cost a TLB miss per page.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pllm {

template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n, bool zero = true) { resize(n, zero); }
  // zero false: the memory is left untouched (no page is faulted in until written), for a
  // caller that writes every element it later reads.
  void resize(size_t n, bool zero = true) {
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t want = n * sizeof(T);
    const size_t align = want >= kHuge ? kHuge : want >= 4096 ? 4096 : 64;
    const size_t bytes = ((want + align - 1) / align) * align;
    void* p = bytes ? std::aligned_alloc(align, bytes) : nullptr;
    if (bytes && !p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == kHuge) ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: failure just means 4 KiB pages
#endif
    if (p && zero) std::memset(p, 0, bytes);
    ptr_.reset(static_cast<T*>(p));
    size_ = n;
  }
  T* data() { return ptr_.get(); }
  const T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return ptr_.get()[i]; }
  const T& operator[](size_t i) const { return ptr_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace pllm
