// A fixed-size, 64-byte aligned, zero-initialised array (scratch, KV cache).
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
    const size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
    void* p = bytes ? std::aligned_alloc(64, bytes) : nullptr;
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
