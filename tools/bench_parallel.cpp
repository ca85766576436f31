#include "bench_parallel.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace cli {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

ParallelBench bench_parallel(Model& model, const SessionOptions& so, int threads,
                             const std::vector<std::vector<pllm_token>>& prompts, int n_gen, int reps,
                             const std::function<pllm_token(pllm_token)>& next) {
  const size_t N = prompts.size(), P = prompts[0].size();
  Engine engine(threads, so.backend);
  std::vector<std::unique_ptr<Session>> sessions;
  for (size_t i = 0; i < N; ++i) sessions.push_back(std::make_unique<Session>(model, so, &engine));
  const size_t chunk = size_t(pllm_session_n_batch(sessions[0]->p));
  const int32_t n_vocab = pllm_model_n_vocab(model.p);
  std::vector<pllm_step_item> items(N);
  std::vector<pllm_token> tok(N);

  auto prefill = [&](size_t n_tokens) {
    for (size_t done = 0; done < n_tokens; done += chunk) {
      for (size_t i = 0; i < N; ++i)
        items[i] = {sessions[i]->p, prompts[i].data() + done, std::min(chunk, n_tokens - done), nullptr, nullptr, -1, PLLM_OK};
      check(pllm_engine_step(engine.p, items.data(), N), "prefill step");
      for (const pllm_step_item& it : items) check(it.status, "prefill step");
    }
  };
  auto decode_step = [&] {
    for (size_t i = 0; i < N; ++i) items[i] = {sessions[i]->p, &tok[i], 1, nullptr, nullptr, -1, PLLM_OK};
    check(pllm_engine_step(engine.p, items.data(), N), "decode step");
    for (size_t i = 0; i < N; ++i) {
      check(items[i].status, "decode step");
      const float* l = pllm_session_logits(sessions[i]->p);
      tok[i] = next(pllm_token(std::max_element(l, l + n_vocab) - l));
    }
  };

  // Warm-up: page the weights in, wake the threads, size the step scratch (not timed).
  prefill(std::min<size_t>(P, 32));
  for (size_t i = 0; i < N; ++i) tok[i] = prompts[i][0];
  for (int k = 0; k < std::min(n_gen, 4); ++k) decode_step();

  ParallelBench r;
  for (int rep = 0; rep < reps; ++rep) {
    for (auto& s : sessions) pllm_session_reset(s->p);
    const auto t0 = Clock::now();
    prefill(P);
    const double prefill_s = seconds_since(t0);
    for (size_t i = 0; i < N; ++i) tok[i] = prompts[i].back();
    const auto t1 = Clock::now();
    decode_step();
    const double first_s = seconds_since(t1);
    for (int k = 1; k < n_gen; ++k) decode_step();
    const double decode_s = seconds_since(t1);
    r.pp_agg.push_back(double(N * P) / prefill_s);
    r.tg_agg.push_back(double(N) * n_gen / decode_s);
    r.tg_step_ms.push_back(decode_s * 1e3 / n_gen);
    r.ttft_ms.push_back((prefill_s + first_s) * 1e3);
  }
  return r;
}

}  // namespace cli
