// Options shared by `run` and `chat`, and the streaming generation call they both make.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli_common.h"
#include "draft_options.h"
#include "grammar_options.h"

namespace cli {

struct GenerationOptions {
  std::string model;
  std::string system;
  int n_predict = 256;
  float temp = 0.0f;  // the sampling values apply only where their flag is given
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  bool seed_given = false;
  bool ignore_eos = false;
  std::string chat_template = "file";  // --chat-template file|native
  std::string template_vars;           // --chat-template-kwargs JSON
  SessionOptions session;  // -t, -c, --int8-act, --no-fuse, --profile
  CacheOptions cache;      // --cache-dir, --cache-ram, --cache-disk, --no-cache
  GrammarOptions grammar;  // --grammar-file, --json-schema, --json-object
  DraftOptions draft;      // --draft, --draft-model, --draft-skip-*, --draft-max

  void add_to(CLI::App* cmd);
  // The model as these options load it (--repack, --chat-template).
  Model load_model() const;
  // The model's sampling (pllm_model_sampling_params: its file's general.sampling.* keys over
  // the defaults) with the flags the user gave on top.
  pllm_sampling_params sampling(const pllm_model* model) const;

 private:
  CLI::App* cmd_ = nullptr;
  bool given(const char* flag) const { return cmd_ && cmd_->count(flag) > 0; }
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

}  // namespace cli
