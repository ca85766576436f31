// `pocketllm chat-bench`: the scripted chat workload of the prefix-cache issue. A long
// system prompt (the first --system-tokens tokens of a text file), then --turns user
// messages that "arrive as typed" at --cps characters per second; each turn generates -n
// tokens greedily and the time to first token is measured from the moment the message is
// complete ("send"). Modes (--mode):
//   none     a fresh session per turn, no cache: every turn prefills the whole conversation
//   session  one session for the whole chat: each turn reuses the previous turn's KV cache
//   ram      a fresh session per turn (a stateless server) with a RAM prefix cache
//   disk     a fresh session per turn with a prefix cache read from --cache-dir only (RAM
//            tier off): run once to fill the directory, then again as "after a restart"
//   prewarm  one session + RAM cache, and while the user types, the conversation so far
//            (everything before the new message) is prewarmed in the background
// Prints TTFT P50/P95 and the cache counters (--json: one object).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "generation_options.h"

namespace cli {
namespace {

const char* const kMessages[] = {
    "Can you summarise the text above in two sentences?",
    "What does it say about lists?",
    "Give me a short example of a dictionary.",
    "How do I read a file line by line?",
    "What is a generator and when would I use one?",
    "Explain exceptions in one paragraph.",
    "What is the difference between a tuple and a list?",
    "How do I format a number with two decimals?",
    "What are modules for?",
    "Thanks! Any last tip for a beginner?",
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double idx = p * double(v.size() - 1);
  const size_t lo = size_t(std::floor(idx)), hi = size_t(std::ceil(idx));
  return v[lo] + (v[hi] - v[lo]) * (idx - double(lo));
}

// The rendered conversation as tokens; without the generation prompt it is what is known
// while the user is still typing the next message.
std::vector<pllm_token> render(const Model& m, const std::vector<std::pair<std::string, std::string>>& msgs,
                               bool generation_prompt) {
  std::vector<pllm_chat_message> cm;
  for (const auto& [role, content] : msgs) cm.push_back({role.c_str(), content.c_str()});
  char* out = nullptr;
  check(pllm_chat_apply_template(m.p, cm.data(), cm.size(), generation_prompt ? 1 : 0, &out),
        "applying the chat template");
  const std::string text(out);
  pllm_string_free(out);
  return tokenize_prompt(m, text);
}

}  // namespace

std::function<int()> add_chat_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat-bench", "scripted chat workload: TTFT with and without the prefix cache");
  struct Opts {
    std::string model, file, mode = "session", cache_dir;
    int system_tokens = 1000, turns = 10, n_gen = 16;
    double cps = 20.0;
    bool json = false;
    SessionOptions sess;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "GGUF model");
  cmd->add_option("-f,--file", o->file, "text whose beginning is the system prompt")->required();
  cmd->add_option("--system-tokens", o->system_tokens, "system prompt length in tokens (default 1000)")
      ->check(CLI::Range(16, 1 << 20));
  cmd->add_option("--turns", o->turns, "user turns (default 10, at most 10)")->check(CLI::Range(1, 10));
  cmd->add_option("-n,--n-gen", o->n_gen, "tokens generated per turn (default 16)")->check(CLI::Range(1, 4096));
  cmd->add_option("--cps", o->cps, "typing speed in characters per second (default 20)")
      ->check(CLI::Range(0.1, 10000.0));
  cmd->add_option("--mode", o->mode, "none | session | ram | disk | prewarm")
      ->check(CLI::IsMember({"none", "session", "ram", "disk", "prewarm"}));
  cmd->add_option("--cache-dir", o->cache_dir, "directory of the disk tier (mode disk)");
  cmd->add_option("-t,--threads", o->sess.threads, "threads")->check(CLI::Range(0, 256));
  cmd->add_option("-c,--ctx-size", o->sess.n_ctx, "context size (default 4096)")->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--json", o->json, "print one JSON object");
  o->sess.add_to(cmd);
  return [o]() {
    if (o->mode == "disk" && o->cache_dir.empty()) fail("--mode disk needs --cache-dir");
    Model model(resolve_model_path(o->model), false, o->sess.repack_weights());
    std::ifstream in(o->file, std::ios::binary);
    if (!in) fail("cannot read " + o->file);
    std::stringstream ss;
    ss << in.rdbuf();
    // The system prompt: the first --system-tokens tokens of the file, as text.
    const std::vector<pllm_token> all = tokenize(model, ss.str(), false, false);
    if (all.size() < size_t(o->system_tokens))
      fail(o->file + " has only " + std::to_string(all.size()) + " tokens");
    std::vector<char> buf(size_t(o->system_tokens) * 64 + 1);
    size_t len = 0;
    check(pllm_detokenize(model.p, all.data(), size_t(o->system_tokens), 0, buf.data(), buf.size(), &len),
          "detokenizing the system prompt");
    const std::string system(buf.data(), len);

    pllm_prefix_cache* cache = nullptr;
    if (o->mode == "ram" || o->mode == "disk" || o->mode == "prewarm") {
      pllm_prefix_cache_params cp = pllm_prefix_cache_default_params();
      if (o->mode == "disk") {
        cp.ram_bytes = 0;
        cp.dir = o->cache_dir.c_str();
      }
      check(pllm_prefix_cache_create(model.p, &cp, &cache), "creating the prefix cache");
    }
    SessionOptions so = o->sess;
    if (so.n_ctx == 0) so.n_ctx = 4096;
    std::unique_ptr<Session> session;
    auto fresh_session = [&] {
      session = std::make_unique<Session>(model, so);
      if (cache) check(pllm_session_set_prefix_cache(session->p, cache), "attaching the cache");
    };
    fresh_session();
    pllm_sampling_params sp = pllm_sampling_default_params();
    sp.temperature = 0.0f;
    sp.max_tokens = o->n_gen;
    sp.ignore_eos = 1;

    std::vector<std::pair<std::string, std::string>> msgs = {{"system", system}};
    std::vector<double> ttft;
    std::vector<int> cached, reused, prompt_len;
    for (int t = 0; t < o->turns; ++t) {
      const std::string user = kMessages[t];
      const auto typing = std::chrono::duration<double>(double(user.size()) / o->cps);
      if (o->mode == "none" || o->mode == "ram" || o->mode == "disk") fresh_session();
      if (o->mode == "prewarm") {
        // Known while the user types: the conversation so far (its rendering is a prefix of
        // the next prompt up to the last message's end).
        const std::vector<pllm_token> known = render(model, msgs, false);
        check(pllm_session_prewarm(session->p, known.data(), known.size()), "prewarming");
      }
      std::this_thread::sleep_for(typing);  // the user types; only prewarm uses the time
      msgs.push_back({"user", user});
      const std::vector<pllm_token> prompt = render(model, msgs, true);
      // TTFT as pllm_generate measures it: from the call (= send) to the first token.
      GenerationResult r = generate(*session, prompt, sp, false);
      ttft.push_back(r.stats.ttft_ms);
      cached.push_back(r.stats.n_cached_tokens);
      reused.push_back(r.stats.n_reused_tokens);
      prompt_len.push_back(r.stats.n_prompt_tokens);
      msgs.push_back({"assistant", r.text});
      if (!o->json)
        std::fprintf(stderr, "turn %2d: prompt %5d tokens, reused %5d (from cache %5d), TTFT %8.1f ms\n", t + 1,
                     r.stats.n_prompt_tokens, r.stats.n_reused_tokens, r.stats.n_cached_tokens, r.stats.ttft_ms);
    }
    pllm_prefix_cache_counters cc{};
    if (cache) {
      pllm_prefix_cache_flush(cache);
      check(pllm_prefix_cache_stats(cache, &cc), "reading the cache counters");
    }
    session.reset();
    pllm_prefix_cache_free(cache);
    const double p50 = percentile(ttft, 0.5), p95 = percentile(ttft, 0.95);
    auto hit_rate = [](uint64_t h, uint64_t m) { return h + m ? double(h) / double(h + m) : 0.0; };
    if (o->json) {
      nlohmann::ordered_json j = {{"mode", o->mode},         {"turns", o->turns},
                                  {"system_tokens", o->system_tokens}, {"cps", o->cps},
                                  {"ttft_p50_ms", p50},      {"ttft_p95_ms", p95},
                                  {"ttft_ms", ttft},         {"prompt_tokens", prompt_len},
                                  {"reused_tokens", reused}, {"cached_tokens", cached},
                                  {"ram_hit_rate", hit_rate(cc.ram_hits, cc.ram_misses)},
                                  {"disk_hit_rate", hit_rate(cc.disk_hits, cc.disk_misses)},
                                  {"restored_tokens", cc.restored_tokens},
                                  {"computed_tokens", cc.computed_tokens}};
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("mode %s: TTFT P50 %.1f ms, P95 %.1f ms over %d turns", o->mode.c_str(), p50, p95, o->turns);
    if (cache)
      std::printf("; RAM hits %llu/%llu, disk hits %llu/%llu, restored %llu / computed %llu tokens",
                  (unsigned long long)cc.ram_hits, (unsigned long long)(cc.ram_hits + cc.ram_misses),
                  (unsigned long long)cc.disk_hits, (unsigned long long)(cc.disk_hits + cc.disk_misses),
                  (unsigned long long)cc.restored_tokens, (unsigned long long)cc.computed_tokens);
    std::printf("\n");
    return 0;
  };
}

}  // namespace cli
