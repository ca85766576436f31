// Where the tests find files of the checkout. Defined in test_paths.cpp, the one test file
// compiled with the checkout's absolute path: every other test object is then the same for
// clones at different paths, and the compiler cache serves it to all of them.
#pragma once
#include <string>
#include <vector>

namespace pllm::test {
extern const char* const kSourceDir;       // the repository root
extern const char* const kSharedTestdata;  // ../shared/testdata beside it (may be absent)
// The llama.cpp vocabularies in kSharedTestdata/tokenizer (ggml-vocab-*.gguf), sorted; {"none"}
// when there are none, so that a parametrised suite still has one case to skip.
std::vector<std::string> tokenizer_vocab_files();
}  // namespace pllm::test
