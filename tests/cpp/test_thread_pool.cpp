#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace pllm {
namespace {

TEST(ThreadPool, RunsEveryTaskOnceManyTimes) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int job = 0; job < 300; ++job) {
      const int n = 1 + job % 37;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run(n, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " job " << job;
    }
  }
}

// run_spread groups consecutive indices into tasks: still every index exactly once, for counts
// below, at and far above the 8 tasks per thread it aims at (remainders included).
TEST(ThreadPool, RunSpreadCallsEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int n : {0, 1, 7, 16, 17, 48, 511, 512, 1000, 4099}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run_spread(n, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " n " << n << " i " << i;
    }
  }
}

// set_active(k): only k threads (the caller included) run a job's tasks; changing k between
// jobs, fast, never loses or repeats a task (a worker left out of one job must not be counted
// in the next: the participant count travels in the job's generation word).
TEST(ThreadPool, ActiveThreadsLimitWhoRuns) {
  ThreadPool pool(4);
  std::mutex mu;
  for (int job = 0; job < 400; ++job) {
    const int k = 1 + (job * 7) % 4;
    pool.set_active(k);
    ASSERT_EQ(pool.active(), k);
    const int n = 8 + job % 23;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::set<std::thread::id> who;
    pool.run(n, [&](int64_t i) {
      hits[size_t(i)].fetch_add(1);
      {
        std::lock_guard lk(mu);
        who.insert(std::this_thread::get_id());
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
    });
    for (int i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "job " << job << " active " << k;
    ASSERT_LE(int(who.size()), k) << "job " << job;
  }
  pool.set_active(0);
  EXPECT_EQ(pool.active(), 1);
  pool.set_active(99);
  EXPECT_EQ(pool.active(), 4);
}

// run_indexed: each task learns its thread's index, in [0, size()), 0 for the calling thread;
// a task running while another does never holds its index (per-thread scratch relies on it),
// and one index always names the same thread. Checked with every count of active threads.
TEST(ThreadPool, RunIndexedGivesEachRunningThreadItsOwnIndex) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> busy(static_cast<size_t>(threads));
    std::vector<std::thread::id> owner(static_cast<size_t>(threads));
    std::mutex mu;
    for (int job = 0; job < 200; ++job) {
      pool.set_active(1 + job % threads);
      const int n = 1 + job % 29;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> out_of_range{0}, shared{0}, renamed{0}, caller_not_zero{0};
      const std::thread::id caller = std::this_thread::get_id();
      pool.run_indexed(n, [&](int64_t i, int t) {
        hits[size_t(i)].fetch_add(1);
        if (t < 0 || t >= threads) {
          out_of_range.fetch_add(1);
          return;
        }
        if (busy[size_t(t)].fetch_add(1) != 0) shared.fetch_add(1);
        {
          std::lock_guard lk(mu);
          std::thread::id& o = owner[size_t(t)];
          if (o == std::thread::id()) o = std::this_thread::get_id();
          else if (o != std::this_thread::get_id()) renamed.fetch_add(1);
        }
        if ((std::this_thread::get_id() == caller) != (t == 0)) caller_not_zero.fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
        busy[size_t(t)].fetch_sub(1);
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " job " << job;
      ASSERT_EQ(out_of_range.load(), 0) << "threads " << threads << " job " << job;
      ASSERT_EQ(shared.load(), 0) << "threads " << threads << " job " << job;
      ASSERT_EQ(renamed.load(), 0) << "threads " << threads << " job " << job;
      ASSERT_EQ(caller_not_zero.load(), 0) << "threads " << threads << " job " << job;
    }
  }
}

TEST(ThreadPool, SurvivesSleepingWorkers) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // workers fall asleep
    pool.run(100, [&](int64_t i) { sum.fetch_add(i); });
  }
  EXPECT_EQ(sum.load(), 3 * 4950);
}

TEST(Cores, PicksBigCoresOnHeterogeneousCpus) {
  // 1 prime @3.2 GHz, 3 big @2.8, 4 little @2.0 (a typical phone): 4 performance cores.
  std::vector<CpuInfo> cpus;
  for (int i = 0; i < 8; ++i) cpus.push_back({0, i, i == 0 ? 3200000u : (i < 4 ? 2800000u : 2000000u)});
  EXPECT_EQ(count_performance_cores(cpus), 4);
  // SMT siblings share a core id: counted once.
  std::vector<CpuInfo> smt = {{0, 0, 3000000}, {0, 0, 3000000}, {0, 1, 3000000}, {0, 1, 3000000}};
  EXPECT_EQ(count_performance_cores(smt), 2);
  // No cpufreq: every core counts.
  std::vector<CpuInfo> unknown = {{0, 0, 0}, {0, 1, 0}, {0, 2, 0}};
  EXPECT_EQ(count_performance_cores(unknown), 3);
  EXPECT_GE(default_thread_count(), 1);
}

}  // namespace
}  // namespace pllm

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

TEST(ThreadPool, BackgroundWorkersRunAtLowerPriority) {
  const int base = getpriority(PRIO_PROCESS, 0);
  if (base >= 10) GTEST_SKIP() << "the process already runs at nice " << base << ": workers keep it (never raised)";
  pllm::ThreadPool pool(3, 10);
  std::atomic<int> lowered{0}, seen{0};
  // Enough tasks that the workers take some; each reports its own thread's nice value. On a
  // loaded machine the lowered workers may not be scheduled for a while, so a task on the
  // caller's thread waits (up to 5 s) until a worker has taken one.
  const long caller = syscall(SYS_gettid);
  pool.run(64, [&](int64_t) {
    const long tid = syscall(SYS_gettid);
    const int me = getpriority(PRIO_PROCESS, id_t(tid));
    seen++;
    if (me >= 10) lowered++;  // the pool's nice (base < 10 here)
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (tid == caller && lowered.load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_EQ(seen.load(), 64);
  EXPECT_GT(lowered.load(), 0) << "no task ran on a lowered worker";
  EXPECT_EQ(getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid))), base) << "the caller keeps its priority";
}
#endif
