// Options shared by `run` and `chat`, and the streaming generation call they both make.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli_common.h"

namespace cli {

struct GenerationOptions {
  std::string model;
  std::string system;
  int n_predict = 256;
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  bool seed_given = false;
  bool ignore_eos = false;
  SessionOptions session;  // -t, -c, --int8-act, --no-fuse, --profile
  CacheOptions cache;      // --cache-dir, --cache-ram, --cache-disk, --no-cache

  void add_to(CLI::App* cmd);
  pllm_sampling_params sampling() const;
};

struct GenerationResult {
  std::string text;
  std::vector<pllm_token> tokens;
  pllm_generation_stats stats{};
};

// Runs pllm_generate, streaming text to stdout when `stream` is set.
GenerationResult generate(Session& s, const std::vector<pllm_token>& prompt, const pllm_sampling_params& sp,
                          bool stream);

// Tokenises a rendered chat prompt: special tokens parsed, BOS added if the model wants
// one and the template did not already write it.
std::vector<pllm_token> tokenize_prompt(const Model& m, const std::string& text);

}  // namespace cli
