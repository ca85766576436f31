// Type traits for the ggml tensor type ids (block sizes as in ggml).
#include "quant/types.h"

#include "base/checked.h"

namespace pllm {

namespace {

struct Entry {
  uint32_t id;
  TypeTraits traits;
};

constexpr Entry kEntries[] = {
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},
    {6, {"Q5_0", 32, 22, true}},
    {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},
    {9, {"Q8_1", 32, 36, false}},
    {10, {"Q2_K", 256, 84, true}},
    {11, {"Q3_K", 256, 110, true}},
    {12, {"Q4_K", 256, 144, true}},
    {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}},
    {15, {"Q8_K", 256, 292, false}},
    {20, {"IQ4_NL", 32, 18, true}},
    {23, {"IQ4_XS", 256, 136, true}},
    {30, {"BF16", 1, 2, true}},
};

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t ggml_type) {
  for (const Entry& e : kEntries) {
    if (e.id == ggml_type) return e.traits;
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(uint32_t ggml_type, uint64_t n) {
  const auto t = type_traits(ggml_type);
  if (!t) return std::nullopt;
  if (n % t->block_elems != 0) return std::nullopt;
  return checked_mul(n / t->block_elems, t->block_bytes);
}

}  // namespace pllm
