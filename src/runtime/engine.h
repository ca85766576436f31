// The engine: owns the threads and the step scratch, and runs forward steps for every
// session created on it. Sessions of one process share one engine (one thread pool, not one
// spinning pool each); a step may carry rows of many sessions, so the weights are read once
// for all of them (Session::step). Steps are serialised per lane: concurrent callers on
// different threads are safe and take turns.
#pragma once
#include <memory>
#include <mutex>
#include <span>

#include "backends/cpu/step_scratch.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/step.h"

namespace pllm {

class Engine {
 public:
  // Foreground steps run on the pool; background work (pre-warm) on a second, lower-priority
  // pool of the same size, created on first use, with its own scratch, so it never blocks a
  // foreground step.
  enum class Lane { foreground, background };

  // n_threads: 0 = default_thread_count().
  static Result<std::shared_ptr<Engine>> create(int n_threads = 0);
  // Steps on an existing pool the app owns (like llama.cpp's attach_threadpool). The pool
  // must outlive the engine and be used by nothing else while a step runs.
  static std::shared_ptr<Engine> attach(ThreadPool& pool);

  int n_threads() const { return fg_.pool->size(); }
  // Foreground steps use only n of the threads (1..n_threads()) from the next step on; the
  // others sleep. The runtime lowers it to leave a core to the UI or to cool down. On an
  // attached pool this limits the app's pool too.
  void set_active_threads(int n) { fg_.pool->set_active(n); }
  int active_threads() const { return fg_.pool->active(); }

  // One forward pass of model m over seqs (model/step.h; backends/cpu/cpu_forward.h).
  Result<void> forward(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt,
                       Lane lane = Lane::foreground);

 private:
  struct LaneState {
    std::mutex mu;
    ThreadPool* pool = nullptr;
    std::unique_ptr<ThreadPool> owned;
    StepScratch scratch;
  };
  Engine() = default;
  LaneState& lane(Lane l);

  LaneState fg_;
  std::mutex bg_init_;
  LaneState bg_;
};

}  // namespace pllm
