#include "base/thread_pool.h"

#if defined(__linux__)
#include <sys/resource.h>
#include <cerrno>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <fstream>
#include <set>
#include <string>

namespace pllm {

ThreadPool::ThreadPool(int n_threads, int nice) : n_threads_(n_threads < 1 ? 1 : n_threads), active_(n_threads_) {
  generation_.store(uint64_t(n_threads_ - 1));
  // A worker compares the generation with the one it saw last; it starts from the one before
  // any job (a thread that starts after the first dispatch must still take part in it).
  const uint64_t initial = generation_.load();
  for (int i = 1; i < n_threads_; ++i)
    workers_.emplace_back([this, nice, i, initial] {
      if (nice > 0) lower_thread_priority(nice);
      worker_loop(i, initial);
    });
}

void lower_thread_priority(int nice) {
#if defined(__linux__)
  // Only ever lower: a thread already nicer than `nice` (say, a niced process) keeps its value
  // (root could otherwise raise it). Best effort: failure leaves it as is.
  const id_t tid = id_t(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && now >= nice) return;
  setpriority(PRIO_PROCESS, tid, nice);
#else
  (void)nice;
#endif
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
constexpr int kParticipantBits = 16;
constexpr uint64_t kParticipantMask = (uint64_t(1) << kParticipantBits) - 1;
}  // namespace

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lk(mu_);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    const int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_tasks_) break;
    tramp_(ctx_, i, thread);
  }
}

void ThreadPool::dispatch(int64_t n_tasks, Trampoline tramp, void* ctx) {
  tramp_ = tramp;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_.store(0, std::memory_order_relaxed);
  const int participants = active() - 1;
  pending_.store(participants, std::memory_order_relaxed);
  // seq_cst: publishes the job, ordered before the sleepers_ read. Only the dispatching
  // thread writes generation_ (runs of one pool do not overlap).
  generation_.store(((generation_.load(std::memory_order_relaxed) >> kParticipantBits) + 1) << kParticipantBits |
                    uint64_t(participants));
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_start_.notify_all();
  }
  work(0);
  // Wait for stragglers; yield now and then so an oversubscribed CPU can run them.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if ((spins & 255) == 255) std::this_thread::yield();
    else cpu_relax();
  }
}

void ThreadPool::worker_loop(int index, uint64_t seen) {
  for (;;) {
    bool got = false;
    // A worker left out of the last job sleeps at once: spinning would take the core it leaves.
    const int spins = uint64_t(index) <= (seen & kParticipantMask) ? kSpinIterations : 0;
    for (int i = 0; i < spins; ++i) {
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
    if (uint64_t(index) > (seen & kParticipantMask)) continue;  // not in this job
    work(index);
    pending_.fetch_sub(1, std::memory_order_release);
  }
}

int count_performance_cores(const std::vector<CpuInfo>& cpus) {
  uint64_t top = 0;
  for (const CpuInfo& c : cpus) top = std::max(top, c.max_freq_khz);
  // Big and prime cores run within ~25% of the fastest; little cores far below. Unknown
  // frequencies (0) count as big, so a machine without cpufreq uses all its cores.
  std::set<std::pair<int, int>> cores;
  for (const CpuInfo& c : cpus)
    if (top == 0 || c.max_freq_khz == 0 || c.max_freq_khz * 4 >= top * 3) cores.emplace(c.package, c.core);
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

int default_thread_count() {
  const unsigned hc = std::thread::hardware_concurrency();
  std::vector<CpuInfo> cpus;
  for (unsigned cpu = 0; cpu < hc; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    std::ifstream core(base + "/topology/core_id"), pkg(base + "/topology/physical_package_id");
    CpuInfo info;
    if (!(core >> info.core) || !(pkg >> info.package)) return hc > 0 ? static_cast<int>(hc) : 1;
    std::ifstream freq(base + "/cpufreq/cpuinfo_max_freq");
    if (!(freq >> info.max_freq_khz)) info.max_freq_khz = 0;
    cpus.push_back(info);
  }
  if (cpus.empty()) return hc > 0 ? static_cast<int>(hc) : 1;
  return count_performance_cores(cpus);
}

}  // namespace pllm
