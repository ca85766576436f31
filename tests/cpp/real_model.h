// Where tests find the real SmolLM2 file ($POCKETLLM_MODELS, else <repo>/models) and the small
// helpers the real-model suites share.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "pocketllm/pocketllm.h"
#include "test_paths.h"

inline std::string real_model_path() {
  const char* env = std::getenv("POCKETLLM_MODELS");
  const std::string dir = env && *env ? env : std::string(pllm::test::kSourceDir) + "/models";
  return dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The real model loaded once per test binary (C++ API), or null when the file is absent.
inline std::shared_ptr<const pllm::Model> shared_real_model() {
  static std::shared_ptr<const pllm::Model> model = [] {
    auto m = pllm::Model::load(real_model_path(), false);
    return m.ok() ? std::shared_ptr<const pllm::Model>(m.value()) : nullptr;
  }();
  return model;
}

// A deterministic prompt of `len` token ids, different for each seq (and salt), all well inside
// SmolLM2's vocabulary.
inline std::vector<int32_t> synthetic_prompt(int seq, int len, uint64_t salt = 3) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i)
    p[size_t(i)] = int32_t(1 + ((uint64_t(seq) + salt) * 7919u + uint64_t(i) * 104729u) % 49000u);
  return p;
}

// The user message rendered with the model's chat template and tokenized (C API).
inline std::vector<pllm_token> chat_prompt(pllm_model* model, const char* user) {
  pllm_chat_message m{"user", user};
  char* text = nullptr;
  std::vector<pllm_token> ids;
  if (pllm_chat_apply_template(model, &m, 1, 1, &text) != PLLM_OK) return ids;
  ids.resize(1024);
  size_t n = 0;
  const pllm_status st = pllm_tokenize(model, text, std::strlen(text), 1, 1, ids.data(), ids.size(), &n);
  pllm_string_free(text);
  ids.resize(st == PLLM_OK ? n : 0);
  return ids;
}
