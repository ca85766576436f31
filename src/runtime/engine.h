// The engine: owns the threads and the step scratch, and runs forward steps for every
// session created on it. Sessions of one process share one engine (one thread pool, not one
// spinning pool each); a step may carry rows of many sessions, so the weights are read once
// for all of them (Session::step). Steps are serialised per lane: concurrent callers on
// different threads are safe and take turns.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <span>

#include "backends/cpu/step_scratch.h"
#include "backends/vulkan/vk_backend.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/step.h"

namespace pllm {

// Which backend runs the engine's foreground steps. auto: a GPU when the machine has one
// (never a CPU Vulkan device), per phase as the offload policy (runtime/offload_policy.h)
// chooses from the step times it measures on each; vulkan: the Vulkan device whatever its
// type (lavapipe included); cpu: the CPU only. A step the device cannot take, or a device that
// fails, runs on the CPU with the same result.
enum class EngineBackend { cpu, auto_, vulkan };
Result<EngineBackend> parse_engine_backend(const std::string& s);

// Where the engine's foreground steps ran.
struct BackendStats {
  std::string device;          // the device backend ("" when none)
  std::string device_error;    // why there is none, when one was asked for
  int64_t device_steps = 0;    // steps the device ran
  int64_t cpu_steps = 0;       // steps the CPU ran
  int64_t fallbacks = 0;       // device steps that failed and ran on the CPU instead
  std::string last_fallback;   // why the last step that could not use the device ran on the CPU
  int64_t validation_messages = -1;  // Vulkan validation warnings/errors (PLLM_VK_VALIDATION=1); -1: off
};

class Engine {
 public:
  // Foreground steps run on the pool; background work (pre-warm) on a second, lower-priority
  // pool of the same size, created on first use, with its own scratch, so it never blocks a
  // foreground step.
  enum class Lane { foreground, background };

  // n_threads: 0 = default_thread_count().
  static Result<std::shared_ptr<Engine>> create(int n_threads = 0, EngineBackend backend = EngineBackend::cpu);
  // Steps on an existing pool the app owns (like llama.cpp's attach_threadpool). The pool
  // must outlive the engine and be used by nothing else while a step runs.
  static std::shared_ptr<Engine> attach(ThreadPool& pool);

  int n_threads() const { return fg_.pool->size(); }
  // Foreground steps use only n of the threads (1..n_threads()) from the next step on; the
  // others sleep. The runtime lowers it to leave a core to the UI or to cool down. On an
  // attached pool this limits the app's pool too.
  void set_active_threads(int n) { fg_.pool->set_active(n); }

  // One forward pass of model m over seqs (model/step.h; backends/cpu/cpu_forward.h).
  Result<void> forward(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt,
                       Lane lane = Lane::foreground);

  // Runs `work` on the lane's threads between steps (the lane is held meanwhile): how work
  // that is not a forward step, such as a vision encoder, shares the engine's threads.
  Result<void> run_on_threads(const std::function<Result<void>(ThreadPool&)>& work, Lane lane = Lane::foreground);

  EngineBackend backend() const { return backend_; }
  BackendStats backend_stats() const;
  // A session's cache is going away: the device drops its copy.
  void forget_cache(const KvCache* kv);

 private:
  struct LaneState {
    std::mutex mu;
    ThreadPool* pool = nullptr;
    std::unique_ptr<ThreadPool> owned;
    StepScratch scratch;
  };
  Engine() = default;
  LaneState& lane(Lane l);
  // The device backend for this step, or null for the CPU (fg lane lock held).
  VulkanBackend* pick_device(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt, bool decode);
  void record(bool on_device, bool decode, double ms_per_token, int validation_messages = -1);

  EngineBackend backend_ = EngineBackend::cpu;
  bool device_tried_ = false;            // the device backend was created (or failed to be)
  std::unique_ptr<VulkanBackend> device_;
  // auto: measured ms per token of each phase (prefill, decode) on the device and the CPU; 0: not yet.
  float cost_[2][2] = {{0, 0}, {0, 0}};
  mutable std::mutex stats_mu_;
  BackendStats stats_;

  LaneState fg_;
  std::mutex bg_init_;
  LaneState bg_;
};

}  // namespace pllm
