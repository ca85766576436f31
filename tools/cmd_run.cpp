// `pocketllm run`: answer one prompt, streaming the reply.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "generation_options.h"
#include "image_options.h"

namespace cli {

std::function<int()> add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "answer one prompt");
  struct Opts {
    GenerationOptions gen;
    ImageOptions images;
    std::string prompt, file;
    bool raw = false, json = false;
  };
  auto o = std::make_shared<Opts>();
  o->gen.add_to(cmd);
  o->images.add_to(cmd);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  auto* f = cmd->add_option("-f,--file", o->file, "read the prompt from a file");
  p->excludes(f);
  cmd->add_flag("--raw", o->raw, "do not apply the chat template");
  cmd->add_flag("--json", o->json, "print one JSON object instead of streaming");
  return [o, p, f]() {
    if (!*p && !*f) fail("no prompt: pass -p TEXT or -f FILE");
    std::string text = *f ? read_file(o->file) : o->prompt;
    Model model = o->gen.load_model();
    std::unique_ptr<Vision> vision;
    SessionOptions so = o->gen.session;
    if (o->images.active()) {
      vision = std::make_unique<Vision>(model, o->images);
      so.batch = vision->session_batch(so.batch);
      text = with_image_markers(text, o->images.images.size());
      if (o->gen.draft.kind != "none")
        fail("--draft with --image: speculative decoding over image prompts is not supported yet");
    } else if (!o->images.mmproj.empty()) {
      fail("--mmproj without --image: give the image(s) too");
    }
    std::string rendered = text;
    if (!o->raw) {
      std::vector<std::pair<std::string, std::string>> msgs;
      if (!o->gen.system.empty()) msgs.emplace_back("system", o->gen.system);
      msgs.emplace_back("user", text);
      rendered = apply_template(model, msgs, o->gen.template_vars);
    } else if (!o->gen.system.empty() || !o->gen.template_vars.empty()) {
      fail("--system and --chat-template-kwargs need the chat template (drop --raw)");
    }
    Session session(model, so);
    const auto t_prompt = std::chrono::steady_clock::now();
    const std::vector<pllm_token> ids =
        vision ? tokenize_with_images(*vision, session, rendered, o->images.images) : tokenize_prompt(model, rendered);
    // Tokenizing (with images: decode, preprocess, lay out; the encoder runs in the prefill).
    const double prompt_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_prompt).count();
    PrefixCache cache(model, o->gen.cache);
    cache.attach(session);
    const Grammar grammar(model, o->gen.grammar);
    pllm_sampling_params sp = o->gen.sampling(model.p);
    sp.grammar = grammar.p;
    const Draft draft(o->gen.draft, o->gen.session);
    sp.draft = draft.p();
    const GenerationResult r = generate(session, ids, sp, !o->json);
    if (o->json) {
      nlohmann::json j = {{"text", r.text},
                          {"tokens", r.tokens},
                          {"prompt_tokens", r.stats.n_prompt_tokens},
                          {"ttft_ms", r.stats.ttft_ms},
                          {"prompt_ms", prompt_ms},
                          {"prefill_tps", r.stats.prefill_tps},
                          {"decode_tps", r.stats.decode_tps},
                          {"cached_tokens", r.stats.n_cached_tokens},
                          {"draft_passes", r.stats.n_draft_passes},
                          {"drafted", r.stats.n_drafted},
                          {"draft_accepted", r.stats.n_draft_accepted}};
      if (cache.p) {
        for (const auto& [name, value] : counter_fields(cache.stats())) j["cache"][name] = value;
      }
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("\n");
    }
    std::fflush(stdout);
    session.report_profile(o->gen.session);
    session.report_backend(o->gen.session);
    if (r.stats.n_draft_passes > 0)
      std::fprintf(stderr, "[speculative: %d of %d guesses kept in %d verify passes]\n", r.stats.n_draft_accepted,
                   r.stats.n_drafted, r.stats.n_draft_passes);
    if (r.stats.n_cached_tokens > 0) std::fprintf(stderr, "[%d prompt tokens restored from the prefix cache]\n", r.stats.n_cached_tokens);
    std::fprintf(stderr, "[prompt %d tokens, prefill %.1f tok/s, TTFT %.1f ms, %d tokens at %.1f tok/s, %s]\n",
                 r.stats.n_prompt_tokens, r.stats.prefill_tps, r.stats.ttft_ms, r.stats.n_generated,
                 r.stats.decode_tps, pllm_isa());
    return 0;
  };
}

}  // namespace cli
