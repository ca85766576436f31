// `pocketllm logits`: run token ids from position 0 and write every position's logits as
// little-endian float32 [n_ids][n_vocab] (used by the reference tests).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "cli_common.h"
#include "commands.h"

namespace cli {

std::function<int()> add_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "write the logits of every position of a token sequence");
  struct Opts {
    std::string model, ids, out;
    SessionOptions sess;
    int chunk = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF model");
  cmd->add_option("--ids", o->ids, "token ids separated by spaces or commas")->required();
  cmd->add_option("--out", o->out, "output file")->required();
  cmd->add_option("-t,--threads", o->sess.threads, "threads")->check(CLI::Range(0, 256));
  cmd->add_option("-c,--ctx-size", o->sess.n_ctx, "context size")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--chunk", o->chunk,
                  "append the ids in calls of at most this many tokens (1: every position through the "
                  "one-token decode path); 0 = all at once")
      ->check(CLI::Range(0, 1 << 20));
  o->sess.add_to(cmd);
  return [o]() {
    std::vector<pllm_token> ids;
    std::string s = o->ids;
    for (char& c : s)
      if (c == ',') c = ' ';
    std::istringstream in(s);
    std::string tok;
    while (in >> tok) {
      size_t used = 0;
      long v = 0;
      try {
        v = std::stol(tok, &used);
      } catch (...) {
        used = 0;
      }
      if (used != tok.size() || v < 0 || v > INT32_MAX) fail("bad token id '" + tok + "'");
      ids.push_back(pllm_token(v));
    }
    if (ids.empty()) fail("no token ids given");
    Model model(resolve_model_path(o->model), false, o->sess.repack_weights());
    SessionOptions so = o->sess;
    if (so.n_ctx == 0) so.n_ctx = int(ids.size());
    Session session(model, so);
    std::vector<float> logits(ids.size() * size_t(pllm_model_n_vocab(model.p)));
    const size_t n_vocab = size_t(pllm_model_n_vocab(model.p));
    const size_t step = o->chunk > 0 ? size_t(o->chunk) : ids.size();
    for (size_t i = 0; i < ids.size(); i += step) {
      const size_t n = std::min(step, ids.size() - i);
      check(pllm_session_eval(session.p, ids.data() + i, n, logits.data() + i * n_vocab), "evaluating");
    }
    FILE* f = std::fopen(o->out.c_str(), "wb");
    if (!f) fail("cannot write " + o->out);
    const size_t w = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    if (std::fclose(f) != 0 || w != logits.size()) fail("cannot write " + o->out);
    return 0;
  };
}

}  // namespace cli
