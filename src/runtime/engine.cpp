#include "runtime/engine.h"

#include <chrono>

#include "backends/cpu/cpu_forward.h"
#include "runtime/offload_policy.h"

namespace pllm {

// Scheduling priority of background work (Linux nice; 0 is normal, 19 the lowest).
constexpr int kBackgroundNice = 10;

Result<EngineBackend> parse_engine_backend(const std::string& s) {
  if (s == "cpu") return EngineBackend::cpu;
  if (s == "auto") return EngineBackend::auto_;
  if (s == "vulkan") return EngineBackend::vulkan;
  return make_error(Status::invalid_argument, "unknown backend '" + s + "' (auto, cpu or vulkan)");
}

Result<std::shared_ptr<Engine>> Engine::create(int n_threads, EngineBackend backend) {
  if (n_threads < 0 || n_threads > 256)
    return make_error(Status::invalid_argument, "thread count " + std::to_string(n_threads) + " is out of range");
  std::shared_ptr<Engine> e(new Engine());
  e->fg_.owned = std::make_unique<ThreadPool>(n_threads > 0 ? n_threads : default_thread_count());
  e->fg_.pool = e->fg_.owned.get();
  e->backend_ = backend;
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

BackendStats Engine::backend_stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

Result<void> Engine::run_on_threads(const std::function<Result<void>(ThreadPool&)>& work, Lane l) {
  LaneState& ls = lane(l);
  std::lock_guard<std::mutex> lock(ls.mu);
  try {
    return work(*ls.pool);
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for the work on the engine's threads");
  }
}

void Engine::forget_cache(const KvCache* kv) {
  if (backend_ == EngineBackend::cpu) return;  // no device copies: no wait for a running step
  std::lock_guard<std::mutex> lock(fg_.mu);
  if (device_) device_->forget(kv);
}

VulkanBackend* Engine::pick_device(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt,
                                   bool decode) {
  if (backend_ == EngineBackend::cpu) return nullptr;
  if (!device_tried_) {  // created on the first step that could use it
    device_tried_ = true;
    VulkanOptions o;
    o.allow_cpu_device = backend_ == EngineBackend::vulkan;
    auto d = VulkanBackend::create(o);
    std::lock_guard<std::mutex> lock(stats_mu_);
    if (d.ok()) {
      device_ = std::move(d).value();
      stats_.device = device_->describe();
    } else {
      stats_.device_error = d.error().message;
    }
  }
  if (!device_) return nullptr;
  if (std::string why = device_->unsupported_reason(m, seqs, opt); !why.empty()) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.last_fallback = why;
    return nullptr;
  }
  if (backend_ == EngineBackend::vulkan) return device_.get();
  // auto: measure each side once per phase, then let the offload policy choose.
  const int ph = decode ? 1 : 0;
  if (cost_[0][ph] == 0) return device_.get();
  if (cost_[1][ph] == 0) return nullptr;
  BackendInfo b[2];
  b[0].name = "vulkan";
  b[0].kind = BackendKind::gpu;
  b[1].name = "cpu";
  b[1].kind = BackendKind::cpu;
  for (int i = 0; i < 2; ++i) {
    b[i].available = true;
    b[i].cost_ms_per_token_prefill = cost_[i][0] > 0 ? cost_[i][0] : 1.0f;
    b[i].cost_ms_per_token_decode = cost_[i][1] > 0 ? cost_[i][1] : 1.0f;
  }
  auto c = choose_offload(decode ? Phase::decode : Phase::prefill, b);
  return c.ok() && *c == 0 ? device_.get() : nullptr;
}

void Engine::record(bool on_device, bool decode, double ms_per_token, int validation_messages) {
  float& c = cost_[on_device ? 0 : 1][decode ? 1 : 0];
  c = c == 0 ? float(ms_per_token) : 0.8f * c + 0.2f * float(ms_per_token);  // recent steps weigh most
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++(on_device ? stats_.device_steps : stats_.cpu_steps);
  if (on_device) stats_.validation_messages = validation_messages;
}

Result<void> Engine::forward(const Model& m, std::span<const SeqStep> seqs, const StepOptions& opt, Lane l) {
  LaneState& ls = lane(l);
  std::lock_guard<std::mutex> lock(ls.mu);
  try {
    if (l == Lane::background || backend_ == EngineBackend::cpu) return cpu_forward(m, ls.scratch, *ls.pool, seqs, opt);
    size_t tokens = 0;
    bool decode = true;
    for (const SeqStep& q : seqs) {
      tokens += q.tokens.size();
      decode = decode && q.tokens.size() == 1;
    }
    using clock = std::chrono::steady_clock;
    if (VulkanBackend* dev = pick_device(m, seqs, opt, decode)) {
      const auto t0 = clock::now();
      Result<void> r = dev->forward(m, seqs, opt);
      const Status st = r.ok() ? Status::ok : r.error().code;
      if (st == Status::ok || st == Status::cancelled || st == Status::invalid_argument || st == Status::out_of_range) {
        record(true, decode, std::chrono::duration<double, std::milli>(clock::now() - t0).count() / double(tokens),
               dev->validation_messages());
        return r;
      }
      // The device failed (lost, out of memory, ...): nothing of the sequences moved, so the
      // CPU runs the same step; a lost device is never asked again.
      std::lock_guard<std::mutex> slock(stats_mu_);
      stats_.validation_messages = dev->validation_messages();
      ++stats_.fallbacks;
      stats_.last_fallback = r.error().message;
    }
    const auto t0 = clock::now();
    Result<void> r = cpu_forward(m, ls.scratch, *ls.pool, seqs, opt);
    if (r.ok()) record(false, decode, std::chrono::duration<double, std::milli>(clock::now() - t0).count() / double(tokens));
    return r;
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory for the step's scratch");
  }
}

}  // namespace pllm
