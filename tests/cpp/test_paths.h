// Where the tests find files of the checkout. Defined in test_paths.cpp, the one test file
// compiled with the checkout's absolute path: every other test object is then the same for
// clones at different paths, and the compiler cache serves it to all of them.
#pragma once

namespace pllm::test {
extern const char* const kSourceDir;       // the repository root
extern const char* const kSharedTestdata;  // ../shared/testdata beside it (may be absent)
}  // namespace pllm::test
