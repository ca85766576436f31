#include "base/thread_pool.h"

#include <fstream>
#include <set>
#include <string>

namespace pllm {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
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
  {
    std::lock_guard<std::mutex> lk(mu_);
    tramp_ = tramp;
    ctx_ = ctx;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    active_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  work();
  std::unique_lock<std::mutex> lk(mu_);
  cv_done_.wait(lk, [this] { return active_ == 0; });
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    work();
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--active_ == 0) cv_done_.notify_one();
    }
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
