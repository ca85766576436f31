// Compile-time unrolling for the drivers' register tiles. Compilers leave short constant loops
// over tile rows rolled at their default thresholds (Clang in particular), and a rolled loop
// indexes the accumulators on the stack; unroll<N>(f) emits f.operator()<I>() for I = 0..N-1
// with I a constant expression, so every accumulator stays a register.
#pragma once
#include <utility>

namespace pllm::kern::drivers {

template <int N, class Fn>
inline __attribute__((always_inline)) void unroll(Fn&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f.template operator()<I>(), ...); }(
      std::make_integer_sequence<int, N>{});
}

}  // namespace pllm::kern::drivers
