// `pocketllm draft-calibrate`: which layers a self-speculative draft (--draft skip) leaves out,
// measured on a calibration text (pllm_draft_calibrate), saved for --draft-skip-file.
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"

namespace cli {

std::function<int()> add_draft_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("draft-calibrate",
                                 "choose the layers a self-speculative draft skips (for run/chat --draft skip)");
  struct Opts {
    std::string model, text_file, out;
    int n_tokens = 512, max_draft = 8;
    SessionOptions session;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 download)");
  cmd->add_option("-f,--file", o->text_file, "calibration text (text like what the model will write)")->required();
  cmd->add_option("-o,--out", o->out, "where to write the skip-layer file (JSON)")->required();
  cmd->add_option("-n,--tokens", o->n_tokens, "calibration tokens used (from the text's start)")
      ->check(CLI::Range(16, 1 << 16));
  cmd->add_option("--draft-max", o->max_draft, "the longest draft considered")->check(CLI::Range(1, 32));
  cmd->add_option("-t,--threads", o->session.threads, "threads (default: physical performance cores)")
      ->check(CLI::Range(0, 256));
  o->session.add_to(cmd);
  return [o]() {
    Model model(resolve_model_path(o->model), false, o->session.repack_weights());
    std::vector<pllm_token> ids = tokenize(model, read_file(o->text_file), true, false);
    if (ids.size() > size_t(o->n_tokens)) ids.resize(size_t(o->n_tokens));
    if (o->session.n_ctx == 0) o->session.n_ctx = int(ids.size()) + 64;
    Session session(model, o->session);
    double speedup = 0;
    check(pllm_draft_calibrate(session.p, ids.data(), ids.size(), o->max_draft, o->out.c_str(), &speedup),
          "draft-calibrate");
    std::printf("%s\n", read_file(o->out).c_str());
    std::fprintf(stderr, "[%zu calibration tokens; expected decode speed-up %.2fx; written to %s]\n", ids.size(),
                 speedup, o->out.c_str());
    return 0;
  };
}

}  // namespace cli
