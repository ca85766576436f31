#include "draft_options.h"

namespace cli {

void DraftOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--draft", kind,
                  "speculative decoding: none, lookup (n-grams of the prompt and the reply), model (--draft-model) "
                  "or skip (this model with layers left out: --draft-skip-file from draft-calibrate, or "
                  "--draft-skip-layers); the output is plain decoding's")
      ->check(CLI::IsMember({"none", "lookup", "model", "skip"}));
  cmd->add_option("--draft-model", model, "the draft model for --draft model (same vocabulary)");
  cmd->add_option("--draft-skip-layers", skip_layers, "layers a --draft skip draft leaves out, e.g. 10,12,14")
      ->delimiter(',');
  cmd->add_option("--draft-skip-file", skip_file, "pocketllm draft-calibrate's file for --draft skip");
  cmd->add_option("--draft-max", max_tokens, "guesses per verify pass at most (adapts below it)")
      ->check(CLI::Range(1, 32));
}

void DraftOptions::check() const {
  const bool skip = kind == "skip", with_model = kind == "model";
  if (!model.empty() != with_model) fail("--draft-model goes with --draft model, and --draft model needs it");
  if (!skip && (!skip_layers.empty() || !skip_file.empty()))
    fail("--draft-skip-layers and --draft-skip-file go with --draft skip");
  if (skip && skip_layers.empty() == skip_file.empty())
    fail("--draft skip needs --draft-skip-file or --draft-skip-layers (one of them)");
}

Draft::Draft(const DraftOptions& o, const SessionOptions& session) {
  o.check();
  const bool skip = o.kind == "skip", with_model = o.kind == "model";
  params.max_tokens = o.max_tokens;
  if (o.kind == "lookup") params.kind = PLLM_DRAFT_LOOKUP;
  if (with_model) {
    params.kind = PLLM_DRAFT_MODEL;
    model = std::make_unique<Model>(resolve_model_path(o.model), false, session.repack_weights());
    params.model = model->p;
  }
  if (skip) {
    params.kind = PLLM_DRAFT_SKIP;
    layers.assign(o.skip_layers.begin(), o.skip_layers.end());
    skip_file = o.skip_file;
    if (!skip_file.empty()) params.skip_file = skip_file.c_str();
    else params.skip_layers = layers.data(), params.n_skip_layers = layers.size();
  }
}

}  // namespace cli
