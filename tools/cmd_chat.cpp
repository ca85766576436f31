// `pocketllm chat`: interactive multi-turn conversation. The whole history is rendered each
// turn; the session reuses the part already in its KV cache, so only new text is prefilled.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "generation_options.h"

namespace cli {

std::function<int()> add_chat(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "interactive chat (/reset clears history, /exit quits)");
  auto o = std::make_shared<GenerationOptions>();
  o->add_to(cmd);
  return [o]() {
    Model model = o->load_model();
    Session session(model, o->session);
    PrefixCache cache(model, o->cache);
    cache.attach(session);
    const Grammar grammar(model, o->grammar);  // each reply follows it
    pllm_sampling_params sp = o->sampling(model.p);
    sp.grammar = grammar.p;
    const Draft draft(o->draft, o->session);
    sp.draft = draft.p();
    std::vector<std::pair<std::string, std::string>> history;
    auto reset = [&] {
      history.clear();
      if (!o->system.empty()) history.emplace_back("system", o->system);
    };
    reset();
    std::fprintf(stderr, "chat with %s — /reset to start over, /exit or Ctrl-D to quit\n", o->model.empty() ? "the default model" : o->model.c_str());
    std::string line;
    for (;;) {
      std::fprintf(stdout, "> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, line)) break;
      if (line == "/exit" || line == "/quit") break;
      if (line == "/reset") {
        reset();
        pllm_session_reset(session.p);
        continue;
      }
      if (line.empty()) continue;
      history.emplace_back("user", line);
      const std::vector<pllm_token> ids = tokenize_prompt(model, apply_template(model, history, o->template_vars));
      if (ids.size() + 1 >= size_t(pllm_session_n_ctx(session.p))) {
        std::fprintf(stderr, "the conversation no longer fits the context; /reset to start over\n");
        history.pop_back();
        continue;
      }
      const GenerationResult r = generate(session, ids, sp, true);
      std::fprintf(stdout, "\n");
      history.emplace_back("assistant", r.text);
    }
    std::fprintf(stdout, "\n");
    return 0;
  };
}

}  // namespace cli
