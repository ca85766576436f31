// What runtime tracing costs a real decode step (issue P8: <= 1 % with tracing off, <= 3 % on):
// ScheduledRuntime::step() with four sessions decoding on the real SmolLM2 file, without a
// trace log (none), with one that is switched off (disabled) and with one recording (enabled).
// Run the three interleaved, many times, so that the machine's drift hits them alike:
//   ./bench/kernels/bench_runtime_trace --benchmark_repetitions=12
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// Needs $POCKETLLM_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch_model.sh).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "model/model.h"
#include "runtime/scheduled_runtime.h"
#include "runtime/trace_log.h"

using namespace pllm;

namespace {

std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = [] {
    const char* dir = std::getenv("POCKETLLM_MODELS");
    auto r = Model::load(std::string(dir ? dir : "models") + "/SmolLM2-135M-Instruct.Q4_1.gguf", false);
    return r.ok() ? std::shared_ptr<const Model>(r.value()) : nullptr;
  }();
  return m;
}

// mode 0: no trace log, 1: a log that is disabled, 2: a log that records.
void decode_step(benchmark::State& state) {
  const int mode = int(state.range(0));
  if (!model()) {
    state.SkipWithError("model not found: set POCKETLLM_MODELS");
    return;
  }
  std::unique_ptr<TraceLog> log;
  if (mode > 0) {
    log = std::move(TraceLog::create(1 << 16)).value();
    log->set_enabled(mode == 2);
  }
  RuntimeConfig cfg;
  cfg.trace = log.get();
  auto engine = Engine::create(2);
  auto rt = std::move(ScheduledRuntime::create(model(), *engine, cfg)).value();
  for (int i = 0; i < 4; ++i) {
    SessionConfig sc;
    sc.n_ctx = 4096;
    const int64_t key = rt->add_session(sc).value();
    RuntimeRequest r;
    r.prompt = {1, 2, 3, 4, int32_t(5 + i)};
    r.max_tokens = 1 << 20;
    r.sampling.temperature = 0;
    r.sampling.repeat_penalty = 1.0f;
    (void)rt->submit(key, std::move(r));
  }
  for (int i = 0; i < 4; ++i) (void)rt->step();  // prefill and warm-up
  int64_t rows = 0;
  for (auto _ : state) {
    auto out = rt->step();
    rows += out.ok() ? out->decode_rows : 0;
  }
  state.SetItemsProcessed(rows);
  state.counters["events_recorded"] = log ? double(log->recorded()) : 0.0;
}

BENCHMARK(decode_step)->Arg(0)->Arg(1)->Arg(2)->ArgName("trace")->Iterations(200)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
