#include "runtime/engine.h"

#include "backends/cpu/cpu_forward.h"

namespace pllm {

// Scheduling priority of background work (Linux nice; 0 is normal, 19 the lowest).
constexpr int kBackgroundNice = 10;

Result<std::shared_ptr<Engine>> Engine::create(int n_threads) {
  if (n_threads < 0 || n_threads > 256)
    return make_error(Status::invalid_argument, "thread count " + std::to_string(n_threads) + " is out of range");
  std::shared_ptr<Engine> e(new Engine());
  e->fg_.owned = std::make_unique<ThreadPool>(n_threads > 0 ? n_threads : default_thread_count());
  e->fg_.pool = e->fg_.owned.get();
  return e;
}

std::shared_ptr<Engine> Engine::attach(ThreadPool& pool) {
  std::shared_ptr<Engine> e(new Engine());
  e->fg_.pool = &pool;
  return e;
}

Engine::LaneState& Engine::lane(Lane l) {
  if (l == Lane::foreground) return fg_;
  std::lock_guard<std::mutex> lock(bg_init_);
  if (!bg_.pool) {
    bg_.owned = std::make_unique<ThreadPool>(fg_.pool->size(), kBackgroundNice);
    bg_.pool = bg_.owned.get();
  }
  return bg_;
}

Result<void> Engine::forward(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt, Lane l) {
  LaneState& ls = lane(l);
  std::lock_guard<std::mutex> lock(ls.mu);
  try {
    return cpu_forward(m, ls.scratch, *ls.pool, seqs, opt);
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for the step's scratch");
  }
}

}  // namespace pllm
