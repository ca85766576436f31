// A persistent pool of worker threads. run(n, fn) calls fn(i) for i in [0, n) spread
// over the workers and the calling thread, and returns when all calls are done
// (run_indexed also tells each call which thread runs it).
// No allocation per run: the callable is passed by reference through a trampoline.
// A decode step issues a few hundred small jobs, so hand-off latency matters: workers
// spin briefly on the job counter before sleeping on a condition variable, and the
// caller only takes the mutex when some worker is actually asleep.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace pllm {

class ThreadPool {
 public:
  // n_threads: total threads including the caller; >= 1. nice > 0: the workers run at that
  // lower scheduling priority (Linux/Android per-thread nice; background work such as
  // pre-warm must not take the cores from the UI or a foreground session).
  explicit ThreadPool(int n_threads, int nice = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // How many of the threads (the caller included) take part in the next runs: 1..size().
  // The others sleep instead of spinning, so the cores they leave are really free (for a UI
  // thread in a frame, or to cool down). Takes effect at the next run().
  void set_active(int n) { active_.store(n < 1 ? 1 : (n > n_threads_ ? n_threads_ : n), std::memory_order_relaxed); }
  int active() const { return active_.load(std::memory_order_relaxed); }

  template <class F>
  void run(int64_t n_tasks, F&& fn) {
    run_indexed(n_tasks, [&](int64_t i, int) { fn(i); });
  }

  // As run(), but fn(i, thread) also gets the index of the thread that runs it, in
  // [0, size()): 0 is the calling thread. Two tasks running at once never share an index, so
  // a task may use per-thread scratch memory indexed by it.
  template <class F>
  void run_indexed(int64_t n_tasks, F&& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1 || active() == 1) {
      for (int64_t i = 0; i < n_tasks; ++i) fn(i, 0);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    dispatch(n_tasks, [](void* ctx, int64_t i, int thread) { (*static_cast<Fn*>(ctx))(i, thread); },
             const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // fn(i) for i in [0, n) as run() does, in tasks of consecutive indices: about 8 per thread.
  // For many cheap calls (a row-wise op over a prompt's rows), where one shared-counter
  // increment per index would cost as much as the work.
  template <class F>
  void run_spread(int64_t n, F&& fn) {
    const int64_t per = std::max<int64_t>(1, n / (int64_t(active()) * 8));
    run((n + per - 1) / per, [&](int64_t t) {
      for (int64_t i = t * per, end = std::min(n, i + per); i < end; ++i) fn(i);
    });
  }

 private:
  using Trampoline = void (*)(void*, int64_t, int);
  void dispatch(int64_t n_tasks, Trampoline tramp, void* ctx);
  void worker_loop(int index, uint64_t seen);
  void work(int thread);

  int n_threads_;
  std::atomic<int> active_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_;
  // Bumped once per job: (job counter << 16) | how many workers take part (workers 1..that
  // many), in one word so that a worker reads the two consistently.
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};         // workers blocked on cv_start_
  alignas(64) std::atomic<int> pending_{0};  // workers that have not finished the job
  // The current job (written before generation_ is bumped).
  Trampoline tramp_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_tasks_ = 0;
  alignas(64) std::atomic<int64_t> next_{0};
};

// Lowers the calling thread's scheduling priority to `nice` (no-op where unsupported).
void lower_thread_priority(int nice);

// Number of threads to use by default: one per physical performance core, at least 1.
// On heterogeneous CPUs (big.LITTLE) decode must not spill onto the little cores, whose
// slower steps would stall every barrier; -t overrides.
int default_thread_count();

struct CpuInfo {
  int package = 0;
  int core = 0;
  uint64_t max_freq_khz = 0;  // 0 when unknown
};
// The rule default_thread_count() applies to what sysfs reports (exposed for tests).
int count_performance_cores(const std::vector<CpuInfo>& cpus);

}  // namespace pllm
