// A fixed-size, zero-initialised array (scratch, KV cache): 64-byte (cache line) aligned,
// page aligned once it spans a page, so large buffers start on their own pages.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace pllm {

template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  void resize(size_t n) {
    const size_t align = n * sizeof(T) >= 4096 ? 4096 : 64;
    const size_t bytes = ((n * sizeof(T) + align - 1) / align) * align;
    void* p = bytes ? std::aligned_alloc(align, bytes) : nullptr;
    if (bytes && !p) throw std::bad_alloc();
    if (p) std::memset(p, 0, bytes);
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
