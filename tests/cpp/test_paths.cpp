#include "test_paths.h"

namespace pllm::test {
const char* const kSourceDir = PLLM_SOURCE_DIR;
const char* const kSharedTestdata = PLLM_SHARED_TESTDATA;
}  // namespace pllm::test

#include <algorithm>
#include <filesystem>

std::vector<std::string> pllm::test::tokenizer_vocab_files() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(kSharedTestdata) / "tokenizer";
  std::vector<std::string> names;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("ggml-vocab-", 0) == 0 && e.path().extension() == ".gguf") names.push_back(n);
    }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("none");
  return names;
}
