// Per-thread scratch of the GEMM kernels (internal.h), here so that the std containers behind it
// are never compiled with ISA flags.
#include <cstdint>
#include <memory>

#include "kernels/internal.h"

namespace pllm::kern {

void* gemm_scratch(size_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> buf;
  thread_local size_t cap = 0;
  if (bytes + 64 > cap) {
    cap = (bytes + 64) * 3 / 2;
    buf = std::make_unique_for_overwrite<uint8_t[]>(cap);
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.get());
  return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
}

}  // namespace pllm::kern
