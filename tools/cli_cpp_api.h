// For the commands that use the library's C++ API rather than the C API: quantize, prune,
// calibrate-act (they build and inspect files with the quantizer's parts), serve and simulate
// (they host the server and the scheduled runtime in-process). Everything else in the CLI uses
// only the public C API (cli_common.h).
#pragma once
#include <utility>

#include "base/result.h"
#include "cli_common.h"

namespace cli {

// The value, or the error as the command's one error line (fail()).
template <class T>
T unwrap(pllm::Result<T> r) {
  if (!r.ok()) fail(r.error().message);
  return std::move(r).value();
}
inline void unwrap(pllm::Result<void> r) {
  if (!r.ok()) fail(r.error().message);
}

}  // namespace cli
