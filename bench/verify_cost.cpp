// Verify-pass cost (not a test): what a speculative verify pass of r rows (the drawn token and
// r - 1 guesses, every row's logits, computed as one-row steps: Session::eval_as_steps) costs
// against one plain decode step, at a context of P tokens. bench/speculative.py --cost runs it.
//   verify_cost MODEL THREADS P R1 [R2 ...]
// Prints one JSON line: {"step_ms": ..., "rows": {"r": ms, ...}} (medians of alternated runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/session.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: verify_cost MODEL THREADS P R1 [R2 ...]\n");
    return 2;
  }
  auto model = pllm::Model::load(argv[1], false, {}, pllm::repack_for(pllm::kDefaultActMode));  // as the CLI loads it
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.error().message.c_str());
    return 1;
  }
  std::shared_ptr<const pllm::Model> m(std::move(model).value());
  pllm::SessionConfig cfg;
  cfg.n_threads = std::atoi(argv[2]);
  cfg.n_ctx = 4096;
  auto s = pllm::Session::create(m, cfg);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
    return 1;
  }
  pllm::Session& session = **s;
  const int p = std::atoi(argv[3]), n_vocab = m->config().n_vocab;
  std::vector<int32_t> prompt(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) prompt[size_t(i)] = int32_t(100 + (i * 7919) % (n_vocab - 200));
  if (!session.eval_last(prompt).ok()) return 1;
  std::vector<int> rows;
  for (int i = 4; i < argc; ++i) rows.push_back(std::atoi(argv[i]));
  std::vector<float> logits(size_t(*std::max_element(rows.begin(), rows.end())) * size_t(n_vocab));
  std::vector<double> step;
  std::map<int, std::vector<double>> pass;
  const std::vector<int32_t> tokens = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                                       31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43};
  for (int rep = 0; rep < 7; ++rep) {
    step.push_back(ms_of([&] { (void)session.eval_last({tokens.data(), 1}); }));
    session.truncate(size_t(p));
    for (int r : rows) {
      pass[r].push_back(ms_of([&] { (void)session.eval_as_steps({tokens.data(), size_t(r)}, logits.data()); }));
      session.truncate(size_t(p));
    }
  }
  std::printf("{\"step_ms\": %.3f, \"rows\": {", median(step));
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf("%s\"%d\": %.3f", i ? ", " : "", rows[i], median(pass[rows[i]]));
  std::printf("}}\n");
  return 0;
}
