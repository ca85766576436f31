// --draft / --draft-model / --draft-skip-layers / --draft-skip-file / --draft-max: speculative
// decoding for `run` and `chat` (pllm_draft_params), and the draft model they load.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"

namespace cli {

struct DraftOptions {
  std::string kind = "none";  // none | lookup | model | skip
  std::string model;          // --draft-model
  std::vector<int> skip_layers;
  std::string skip_file;
  int max_tokens = 8;

  void add_to(CLI::App* cmd);
  // Fails with one error line when the flags do not fit together.
  void check() const;
};

// The draft parameters (p() null for none), with the draft model loaded when one is asked for.
// Fails with one error line when the flags do not fit together.
struct Draft {
  Draft(const DraftOptions& o, const SessionOptions& session);
  const pllm_draft_params* p() const { return params.kind == PLLM_DRAFT_NONE ? nullptr : &params; }

 private:
  pllm_draft_params params = pllm_draft_default_params();
  std::unique_ptr<Model> model;
  std::vector<pllm_token> layers;
  std::string skip_file;
};

}  // namespace cli
