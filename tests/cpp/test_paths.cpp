#include "test_paths.h"

namespace pllm::test {
const char* const kSourceDir = PLLM_SOURCE_DIR;
const char* const kSharedTestdata = PLLM_SHARED_TESTDATA;
}  // namespace pllm::test
