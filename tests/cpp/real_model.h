// Where tests find the real SmolLM2 file: $POCKETLLM_MODELS, else <repo>/models.
#pragma once
#include <cstdlib>
#include <string>

inline std::string real_model_path() {
  const char* env = std::getenv("POCKETLLM_MODELS");
  const std::string dir = env && *env ? env : std::string(PLLM_SOURCE_DIR) + "/models";
  return dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}
