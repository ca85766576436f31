// Op-level timing for --profile: a fixed-capacity event buffer (allocated only when
// profiling is on), written by the thread that drives the forward pass, exported as a
// Chrome trace (opens in Perfetto / chrome://tracing) and as a per-op summary.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pllm {

class Tracer {
 public:
  explicit Tracer(size_t capacity = 1 << 18);

  struct Event {
    const char* name;  // a string literal
    int32_t layer;     // -1 when not per layer
    int64_t begin_ns;
    int64_t end_ns;
  };

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void record(const char* name, int layer, int64_t begin_ns, int64_t end_ns) {
    if (events_.size() < events_.capacity()) events_.push_back({name, layer, begin_ns, end_ns});
    else ++dropped_;
  }
  void clear() { events_.clear(); dropped_ = 0; }

  const std::vector<Event>& events() const { return events_; }
  size_t dropped() const { return dropped_; }

  std::string chrome_trace_json() const;
  // One line per op name: total ms, calls, share of the traced time; sorted by total.
  std::string summary() const;

 private:
  std::vector<Event> events_;
  size_t dropped_ = 0;
};

// Times a scope into a tracer; does nothing (one branch) when the tracer is null.
class TraceScope {
 public:
  TraceScope(Tracer* t, const char* name, int layer = -1)
      : t_(t), name_(name), layer_(layer), begin_(t ? Tracer::now_ns() : 0) {}
  ~TraceScope() {
    if (t_) t_->record(name_, layer_, begin_, Tracer::now_ns());
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* t_;
  const char* name_;
  int layer_;
  int64_t begin_;
};

}  // namespace pllm
