#include "base/thread_pool.h"

#include <fstream>
#include <set>
#include <string>

namespace pllm {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
constexpr int kSpinIterations = 1 << 14;  // roughly 100-300 us before a worker sleeps
}  // namespace

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lk(mu_);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work() {
  for (;;) {
    const int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_tasks_) break;
    tramp_(ctx_, i);
  }
}

void ThreadPool::dispatch(int64_t n_tasks, Trampoline tramp, void* ctx) {
  tramp_ = tramp;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes the job, ordered before the sleepers_ read
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_start_.notify_all();
  }
  work();
  // Wait for stragglers; yield now and then so an oversubscribed CPU can run them.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if ((spins & 255) == 255) std::this_thread::yield();
    else cpu_relax();
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    bool got = false;
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen || stop_.load(std::memory_order_relaxed)) {
        got = true;
        break;
      }
      if ((i & 255) == 255) std::this_thread::yield();
      else cpu_relax();
    }
    if (!got) {
      sleepers_.fetch_add(1);  // seq_cst: ordered before the generation_ check below
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return stop_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    work();
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

int default_thread_count() {
  // Count distinct physical cores (core_id per package); fall back to hardware_concurrency.
  std::set<std::pair<std::string, std::string>> cores;
  const unsigned hc = std::thread::hardware_concurrency();
  for (unsigned cpu = 0; cpu < hc; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    std::string c, p;
    if (!(core >> c) || !(pkg >> p)) return hc > 0 ? static_cast<int>(hc) : 1;
    cores.emplace(p, c);
  }
  if (cores.empty()) return hc > 0 ? static_cast<int>(hc) : 1;
  return static_cast<int>(cores.size());
}

}  // namespace pllm
