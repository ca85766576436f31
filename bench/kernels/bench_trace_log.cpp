// Cost of one runtime trace event (runtime/trace_log.h), the number that decides whether
// tracing can stay on (issue P8: <= 1 % overhead off, <= 3 % on):
//   span/{null,disabled,enabled}   a TraceSpan with one arg around an empty scope
//   counter/{disabled,enabled}     TraceLog::counter
//   async/enabled                  one async_begin + async_end pair (2 events)
//   counter/enabled/threads:N      N threads recording into one log (contention on the
//                                  slot counter; items_per_second is the total)
//   clock/now_ns                   the steady clock read every event pays, for scale
// The ring is small (4096) so it wraps throughout, as in a long run.
#include <benchmark/benchmark.h>

#include <memory>

#include "runtime/trace_log.h"

using namespace pllm;

namespace {

constexpr size_t kCapacity = 4096;

std::unique_ptr<TraceLog> make_log(bool enabled) {
  auto r = TraceLog::create(kCapacity);
  if (!r.ok()) return nullptr;
  auto log = std::move(r).value();
  log->set_enabled(enabled);
  return log;
}

void span(benchmark::State& state, TraceLog* log) {
  double i = 0;
  for (auto _ : state) {
    TraceSpan s(log, "decode_step");
    s.arg("rows", i);
    i += 1;
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_SpanNull(benchmark::State& state) { span(state, nullptr); }

void BM_SpanDisabled(benchmark::State& state) {
  auto log = make_log(false);
  span(state, log.get());
}

void BM_SpanEnabled(benchmark::State& state) {
  auto log = make_log(true);
  span(state, log.get());
}

void counter(benchmark::State& state, TraceLog* log) {
  double i = 0;
  for (auto _ : state) {
    log->counter("kv_used", i);
    i += 1;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_CounterDisabled(benchmark::State& state) {
  auto log = make_log(false);
  counter(state, log.get());
}

void BM_CounterEnabled(benchmark::State& state) {
  auto log = make_log(true);
  counter(state, log.get());
}

void BM_AsyncPairEnabled(benchmark::State& state) {
  auto log = make_log(true);
  uint64_t id = 0;
  for (auto _ : state) {
    log->async_begin("request", id);
    log->async_end("request", id);
    ++id;
  }
  state.SetItemsProcessed(2 * state.iterations());
}

void BM_CounterEnabledShared(benchmark::State& state) {
  // One log for every thread of every run; a function-local static is initialised once,
  // thread-safely, whichever thread gets here first.
  static const std::unique_ptr<TraceLog> shared = make_log(true);
  counter(state, shared.get());
}

void BM_NowNs(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(TraceLog::now_ns());
}

}  // namespace

BENCHMARK(BM_SpanNull)->Name("span/null");
BENCHMARK(BM_SpanDisabled)->Name("span/disabled");
BENCHMARK(BM_SpanEnabled)->Name("span/enabled");
BENCHMARK(BM_CounterDisabled)->Name("counter/disabled");
BENCHMARK(BM_CounterEnabled)->Name("counter/enabled");
BENCHMARK(BM_AsyncPairEnabled)->Name("async/enabled");
BENCHMARK(BM_CounterEnabledShared)->Name("counter/enabled")->Threads(2)->Threads(4);

BENCHMARK(BM_NowNs)->Name("clock/now_ns");

BENCHMARK_MAIN();
