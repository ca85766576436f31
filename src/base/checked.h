// Checked arithmetic for every size, count and offset that comes from a file.
#pragma once
#include <cstdint>
#include <optional>

namespace pllm {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Round up to a multiple of `align` (a power of two, non-zero).
inline std::optional<uint64_t> checked_align_up(uint64_t v, uint64_t align) {
  auto s = checked_add(v, align - 1);
  if (!s) return std::nullopt;
  return *s & ~(align - 1);
}

inline bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace pllm
