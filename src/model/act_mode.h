// How activations meet quantised weights: one enum from the C API down to the kernels, and
// one word per mode on every surface (the CLI's --act, serve, simulate, Python, the C API's
// pllm_activations_name): int16, exact, int8, f16, static.
//   int16:  the default. Activations rounded per 32-element block to int16 (a step of 2^-16 of
//           the block maximum, 256 times finer than int8) and dotted with exact integer products
//           (block_q16, TypeKernels::vec_dot_i16act_tile); types without a tile on this ISA, and
//           a prompt's rows where the ISA has no int16 GEMM, take the exact path.
//   exact:  weight blocks decoded to f32 in registers and multiplied with f32 activations:
//           matches a float reference up to summation order.
//   int8:   activations quantised per block to int8 with integer kernels (W4A8/W8A8 as
//           llama.cpp does); on small models the rounding can flip near-tied greedy choices.
//   f16:    W4A16: activations rounded once per row to IEEE half, weight blocks decoded in
//           registers (fp16 FMLA on ARM with FP16 arithmetic, F16C loads + f32 FMA on x86) for
//           Q4_0, Q4_1 and Q8_0; other weight types take the exact path.
//   static (int8_static): int8 with the file's calibrated per-tensor step (Matrix::act_scale)
//           instead of each block's absmax / 127; matrices without a scale stay dynamic.
// Lives in the model layer (not the CPU backend) so the step options, every backend and the
// runtime see it without the CPU matmul.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace pllm {

// The values are stable: a session's compute tag (and so the prefix cache's keys) is the value.
enum class ActMode { exact = 0, int8 = 1, f16 = 2, int8_static = 3, int16 = 4 };

inline constexpr ActMode kDefaultActMode = ActMode::int16;

struct ActModeWord {
  ActMode mode;
  std::string_view word;
};
// Every mode and its word, the default first (help texts list them in this order).
inline constexpr std::array<ActModeWord, 5> kActModeWords = {{{ActMode::int16, "int16"},
                                                              {ActMode::exact, "exact"},
                                                              {ActMode::int8, "int8"},
                                                              {ActMode::f16, "f16"},
                                                              {ActMode::int8_static, "static"}}};

constexpr std::string_view act_mode_name(ActMode m) {
  for (const ActModeWord& w : kActModeWords)
    if (w.mode == m) return w.word;
  return "unknown";
}

// The mode a word names (exactly the words above), or nothing.
constexpr std::optional<ActMode> parse_act_mode(std::string_view word) {
  for (const ActModeWord& w : kActModeWords)
    if (w.word == word) return w.mode;
  return std::nullopt;
}

// "int16|exact|int8|f16|static": for help texts and error messages.
inline std::string act_mode_words(std::string_view sep = "|") {
  std::string out;
  for (const ActModeWord& w : kActModeWords) (out += out.empty() ? "" : sep) += w.word;
  return out;
}

// The int8 kernels (dynamic or static steps).
constexpr bool is_int8(ActMode m) { return m == ActMode::int8 || m == ActMode::int8_static; }

}  // namespace pllm
