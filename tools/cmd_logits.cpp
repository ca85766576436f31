// `pocketllm logits`: run token ids from position 0 and write every position's logits as
// little-endian float32 [n_ids][n_vocab] (used by the reference tests). Several sequences
// ("1 2 3; 4 5") run on one engine, stepped together: each forward pass takes the next
// chunk of every sequence that has ids left; the output is their logits one after another.
#include <algorithm>
#include <climits>
#include <memory>
#include <cstdio>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "image_options.h"

namespace cli {
namespace {

pllm_token parse_id(const std::string& tok) {
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(tok, &used);
  } catch (...) {
    used = 0;
  }
  if (used != tok.size() || v < 0 || v > INT32_MAX) fail("bad token id '" + tok + "'");
  return pllm_token(v);
}

// Every sequence on its own session of one engine; each step advances all that have ids left
// by their next chunk (the session's batch size, or `chunk`). logits: [sum of lengths][n_vocab].
void run_together(Model& model, const SessionOptions& so, const std::vector<std::vector<pllm_token>>& seqs,
                  int chunk, float* logits, size_t n_vocab) {
  Engine engine(so.threads, so.backend);
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<size_t> done(seqs.size(), 0), first(seqs.size(), 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    sessions.push_back(std::make_unique<Session>(model, so, &engine));
    if (i > 0) first[i] = first[i - 1] + seqs[i - 1].size();
  }
  std::vector<pllm_step_item> items;
  for (;;) {
    items.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (done[i] == seqs[i].size()) continue;
      size_t n = size_t(pllm_session_n_batch(sessions[i]->p));
      if (chunk > 0) n = std::min(n, size_t(chunk));
      n = std::min(n, seqs[i].size() - done[i]);
      items.push_back({sessions[i]->p, seqs[i].data() + done[i], n, nullptr, logits + (first[i] + done[i]) * n_vocab,
                       -1, PLLM_OK});
      done[i] += n;
    }
    if (items.empty()) break;
    check(pllm_engine_step(engine.p, items.data(), items.size()), "evaluating");
    for (const pllm_step_item& it : items) check(it.status, "evaluating");
  }
  engine.report_backend(so.backend);
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write " + path);
  const size_t w = std::fwrite(v.data(), sizeof(float), v.size(), f);
  if (std::fclose(f) != 0 || w != v.size()) fail("cannot write " + path);
}

struct LogitsOptions {
  std::string model, ids, out, prompt;
  SessionOptions sess;
  ImageOptions images;
  int chunk = 0;
};

// --prompt with --image: the prompt's tokens (printed as {"tokens": [...]}, image rows
// negative) through one session, every position's logits to --out.
int prompt_with_images(const LogitsOptions& o) {
  if (!o.images.active()) fail("--prompt is for prompts with --image (text alone: tokenize it and pass --ids)");
  Model model(resolve_model_path(o.model), false, o.sess.repack_weights());
  const Vision vision(model, o.images);
  SessionOptions so = o.sess;
  so.batch = vision.session_batch(so.batch);
  Session session(model, so);
  const std::vector<pllm_token> ids =
      tokenize_with_images(vision, session, with_image_markers(o.prompt, o.images.images.size()), o.images.images);
  const size_t n_vocab = size_t(pllm_model_n_vocab(model.p));
  std::vector<float> logits(ids.size() * n_vocab);
  const size_t step = o.chunk > 0 ? size_t(o.chunk) : ids.size();
  for (size_t i = 0; i < ids.size(); i += step) {
    const size_t n = std::min(step, ids.size() - i);
    check(pllm_session_eval(session.p, ids.data() + i, n, logits.data() + i * n_vocab), "evaluating");
  }
  session.report_backend(so);
  write_floats(o.out, logits);
  std::printf("%s\n", nlohmann::json{{"tokens", ids}}.dump().c_str());
  return 0;
}

}  // namespace

std::function<int()> add_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "write the logits of every position of a token sequence");
  auto o = std::make_shared<LogitsOptions>();
  cmd->add_option("-m,--model", o->model, "GGUF model");
  auto* ids = cmd->add_option("--ids", o->ids,
                               "token ids separated by spaces or commas; ';' separates sequences that run together");
  auto* prompt = cmd->add_option("-p,--prompt", o->prompt,
                                 "instead of --ids: a prompt with --image files (tokenized as a prompt; the "
                                 "tokens, image rows negative, are printed as JSON)");
  ids->excludes(prompt);
  o->images.add_to(cmd);
  cmd->add_option("--out", o->out, "output file")->required();
  cmd->add_option("-t,--threads", o->sess.threads, "threads")->check(CLI::Range(0, 256));
  cmd->add_option("-c,--ctx-size", o->sess.n_ctx, "context size")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--chunk", o->chunk,
                  "append the ids in calls of at most this many tokens (1: every position through the "
                  "one-token decode path); 0 = all at once")
      ->check(CLI::Range(0, 1 << 20));
  o->sess.add_to(cmd);
  return [o, ids, prompt]() {
    if (*prompt) return prompt_with_images(*o);
    if (!*ids) fail("no input: pass --ids or --prompt with --image");
    std::vector<std::vector<pllm_token>> seqs(1);
    std::string s = o->ids;
    for (char& c : s)
      if (c == ',') c = ' ';
    std::istringstream in(s);
    std::string tok;
    while (in >> tok) {
      for (size_t at; (at = tok.find(';')) != std::string::npos;) {  // "3;4", "3;", ";"
        if (at > 0) seqs.back().push_back(parse_id(tok.substr(0, at)));
        seqs.emplace_back();
        tok.erase(0, at + 1);
      }
      if (!tok.empty()) seqs.back().push_back(parse_id(tok));
    }
    for (const auto& q : seqs)
      if (q.empty()) fail(seqs.size() > 1 ? "a sequence has no token ids" : "no token ids given");
    Model model(resolve_model_path(o->model), false, o->sess.repack_weights());
    const size_t n_vocab = size_t(pllm_model_n_vocab(model.p));
    size_t total = 0, longest = 0;
    for (const auto& q : seqs) total += q.size(), longest = std::max(longest, q.size());
    SessionOptions so = o->sess;
    if (so.n_ctx == 0) so.n_ctx = int(longest);
    std::vector<float> logits(total * n_vocab);
    if (seqs.size() == 1) {
      Session session(model, so);
      const std::vector<pllm_token>& ids = seqs[0];
      const size_t step = o->chunk > 0 ? size_t(o->chunk) : ids.size();
      for (size_t i = 0; i < ids.size(); i += step) {
        const size_t n = std::min(step, ids.size() - i);
        check(pllm_session_eval(session.p, ids.data() + i, n, logits.data() + i * n_vocab), "evaluating");
      }
      session.report_backend(so);
    } else {
      run_together(model, so, seqs, o->chunk, logits.data(), n_vocab);
    }
    write_floats(o->out, logits);
    return 0;
  };
}

}  // namespace cli
