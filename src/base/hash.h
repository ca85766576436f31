// A small 64-bit non-cryptographic hash for checksums and content keys (KV snapshots,
// prefix-cache keys, model identity). Word-at-a-time FNV-1a-style mixing with a final
// avalanche; the result does not depend on how the input is split across update() calls,
// so a writer and a reader may stream the same bytes in different pieces.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pllm {

class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0) : h_(0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull)) {}

  void update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    len_ += n;
    while (n > 0 && fill_ > 0) {  // finish a word begun by an earlier call
      buf_[fill_++] = *p++;
      --n;
      if (fill_ == 8) {
        mix(load(buf_));
        fill_ = 0;
      }
    }
    for (; n >= 8; n -= 8, p += 8) mix(load(p));
    if (n > 0) {  // here fill_ == 0 and n < 8
      std::memcpy(buf_, p, n);
      fill_ = n;
    }
  }
  void update_u64(uint64_t v) { update(&v, 8); }

  uint64_t digest() const {
    uint64_t h = h_;
    uint64_t last = 0;
    std::memcpy(&last, buf_, fill_);
    h = (h ^ last ^ (uint64_t(fill_) << 56)) * kPrime;
    h ^= len_;
    // Final avalanche (murmur3's fmix64) so every input bit reaches every output bit.
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
  }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  static uint64_t load(const uint8_t* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  void mix(uint64_t w) {
    h_ = (h_ ^ w) * kPrime;
    h_ ^= h_ >> 29;  // FNV's byte-wise multiply only moves bits up; fold them back for words
  }

  uint64_t h_;
  uint64_t len_ = 0;
  uint8_t buf_[8] = {};
  size_t fill_ = 0;
};

inline uint64_t hash64(const void* data, size_t n, uint64_t seed = 0) {
  Hasher h(seed);
  h.update(data, n);
  return h.digest();
}

}  // namespace pllm
