// Compile-time unrolling for the drivers: unroll<N>(f) emits f.operator()<I>() for I = 0..N-1
// with I a constant expression, for loop bodies whose code depends on the index at compile time
// (the int16 tile's add tree over its 8 units, i16_tile.h). Plain short loops over tile rows
// are left to the compiler: wrapping them in lambdas made Clang outline the bodies.
#pragma once
#include <utility>

namespace pllm::kern::drivers {

template <int N, class Fn>
inline __attribute__((always_inline)) void unroll(Fn&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f.template operator()<I>(), ...); }(
      std::make_integer_sequence<int, N>{});
}

}  // namespace pllm::kern::drivers
