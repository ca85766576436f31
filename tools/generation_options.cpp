#include "generation_options.h"

#include <chrono>
#include <cstdio>
#include <random>

namespace cli {

Model GenerationOptions::load_model() const {
  return Model(resolve_model_path(model), false, session.repack_weights(),
               chat_template == "native" ? PLLM_CHAT_TEMPLATE_NATIVE : PLLM_CHAT_TEMPLATE_FILE);
}

void GenerationOptions::add_to(CLI::App* cmd) {
  cmd_ = cmd;
  cmd->add_option("-m,--model", model, "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 download)");
  cmd->add_option("--system", system, "system prompt");
  cmd->add_option("--chat-template", chat_template,
                  "file (default: the model's own tokenizer.chat_template, rendered) or native (the built-in "
                  "layout of its family: ChatML, Llama 3, Gemma, ...)")
      ->check(CLI::IsMember({"file", "native"}));
  cmd->add_option("--chat-template-kwargs", template_vars,
                  "variables for the model's template, a JSON object: '{\"enable_thinking\": false}' turns Qwen3's "
                  "thinking off");
  cmd->add_option("-n,--n-predict", n_predict, "maximum tokens to generate")->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("--ignore-eos", ignore_eos, "keep generating past end-of-generation tokens");
  // Unset sampling flags take the model's values: its file's general.sampling.* keys, else
  // greedy (pllm_model_sampling_params).
  cmd->add_option("--temp", temp, "temperature; 0 = greedy (default: the model's, else 0)")
      ->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", top_k, "top-k cut; 0 = off (default: the model's, else 40)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--top-p", top_p, "nucleus cut; 1 = off (default: the model's, else 0.95)")
      ->check(CLI::Range(1e-6f, 1.0f));
  cmd->add_option("--min-p", min_p, "min-p cut; 0 = off (default: the model's, else 0.05)")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", repeat_penalty, "repetition penalty; 1 = off (default: the model's, else 1)")
      ->check(CLI::Range(1e-3f, 100.0f));
  cmd->add_option("--seed", seed, "random seed (default: random)")->each([this](const std::string&) { seed_given = true; });
  cmd->add_option("-t,--threads", session.threads, "threads (default: physical performance cores)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("-c,--ctx-size", session.n_ctx, "context size in tokens (default: min(model's, 4096))")
      ->check(CLI::Range(0, 1 << 20));
  session.add_to(cmd);
  cache.add_to(cmd);
  grammar.add_to(cmd);
  draft.add_to(cmd);
}

pllm_sampling_params GenerationOptions::sampling(const pllm_model* model) const {
  pllm_sampling_params sp = pllm_model_sampling_params(model);
  if (given("--temp")) sp.temperature = temp;
  if (given("--top-k")) sp.top_k = top_k;
  if (given("--top-p")) sp.top_p = top_p;
  if (given("--min-p")) sp.min_p = min_p;
  if (given("--repeat-penalty")) sp.repeat_penalty = repeat_penalty;
  sp.max_tokens = n_predict;
  sp.ignore_eos = ignore_eos ? 1 : 0;
  sp.seed = seed_given ? seed : std::random_device{}();
  return sp;
}

namespace {
struct StreamCtx {
  GenerationResult* out;
  bool stream;
};
int on_token(pllm_token token, const char* text, size_t len, void* ud) {
  auto* c = static_cast<StreamCtx*>(ud);
  if (token >= 0) c->out->tokens.push_back(token);
  c->out->text.append(text, len);
  if (c->stream && len) {
    std::fwrite(text, 1, len, stdout);
    std::fflush(stdout);
  }
  return 0;
}
}  // namespace

GenerationResult generate(Session& s, const std::vector<pllm_token>& prompt, const pllm_sampling_params& sp,
                          bool stream) {
  GenerationResult r;
  StreamCtx ctx{&r, stream};
  check(pllm_generate(s.p, prompt.data(), prompt.size(), &sp, on_token, &ctx, &r.stats), "generating");
  return r;
}

}  // namespace cli
