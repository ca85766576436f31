// Runtime trace log: what the engine did and why, over time — spans for
// phases, counters (batch size, KV used, tokens/s, thermal level, caps, frame misses), instants,
// and one async track per request. Separate from base/trace.h (the --profile op timer): this
// one stays on in production builds, so its cost matters more than its detail.
//
// Contract:
//   * Bounded: a ring of `capacity` events allocated once at create(); recording never
//     allocates. When full, the OLDEST event is overwritten and dropped() counts it, so a
//     long run keeps its most recent history; recorded() == kept + dropped().
//   * Names and arg keys are pointers to string literals (or other strings that outlive the
//     log): they are stored, never copied.
//   * Thread-safe without a lock: any number of threads may record, snapshot and export at
//     once. A writer claims a slot with one fetch_add and publishes it through the slot's
//     sequence number (a seqlock over atomic words), so writers never sleep on each other or
//     on a reader (a mutex measured ~20x less throughput with two writers contending:
//     futex sleeps; bench/kernels/bench_trace_log.cpp). The one wait: a writer that laps the ring while the
//     writer of the previous lap on its slot is still copying waits for that copy to finish.
//     A snapshot skips events still being written or overwritten while it reads them.
//     Timestamps are taken before the slot is claimed, so snapshot() sorts by time rather
//     than trusting claim order.
//   * Off costs one branch: callers write `if (log && log->enabled())`, or use TraceSpan, which
//     does exactly that. Every recording method also checks enabled() itself.
//   * Export: chrome_json() (Chrome trace event format; opens in Perfetto and
//     chrome://tracing) and, when an AtraceWriter is attached, every event is mirrored as a
//     systrace marker line as it is recorded (Linux/Android trace_marker).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace pllm {

class AtraceWriter;

enum class TraceKind : uint8_t {
  complete,     // a span with begin and end (Chrome "X")
  instant,      // a point in time on a thread (Chrome "i")
  counter,      // a named value over time (Chrome "C")
  async_begin,  // start of a request's track (Chrome "b", matched by id)
  async_end,    // end of it (Chrome "e")
};

inline constexpr int kMaxTraceArgs = 4;

struct TraceArg {
  const char* key;
  double value;
};

// Up to kMaxTraceArgs numeric args, stored inline. Extra args are dropped (add() says so):
// a trace site with more to say should emit a counter.
class TraceArgs {
 public:
  TraceArgs() = default;
  TraceArgs(std::initializer_list<TraceArg> list) {  // NOLINT: implicit so {{"k", v}} works
    for (const TraceArg& a : list) add(a.key, a.value);
  }
  bool add(const char* key, double value) {
    if (count_ >= kMaxTraceArgs) return false;
    items_[count_++] = TraceArg{key, value};
    return true;
  }
  int size() const { return count_; }
  const TraceArg& operator[](int i) const { return items_[i]; }

 private:
  // Only [0, count_) is ever read; leaving the rest unset keeps a disabled TraceSpan cheap.
  TraceArg items_[kMaxTraceArgs];
  uint8_t count_ = 0;
};

struct TraceEvent {
  TraceKind kind = TraceKind::instant;
  uint32_t track = 0;      // thread id (Chrome "tid"); record() fills 0 with the caller's
  const char* name = "";
  int64_t ts_ns = 0;       // TraceLog::now_ns() time; the begin of a complete span
  int64_t end_ns = 0;      // complete spans only
  uint64_t id = 0;         // async events only: the request
  double value = 0.0;      // counters only
  TraceArgs args;
};

class TraceLog {
 public:
  // Bounds the ring at a few hundred MB; a longer history belongs in a file, not in RAM.
  static constexpr size_t kMaxCapacity = size_t(1) << 21;  // 128-byte slots: 256 MiB

  // capacity in [1, kMaxCapacity]. The log starts enabled.
  static Result<std::unique_ptr<TraceLog>> create(size_t capacity);
  ~TraceLog();
  TraceLog(const TraceLog&) = delete;
  TraceLog& operator=(const TraceLog&) = delete;

  static int64_t now_ns();       // steady clock
  static uint32_t thread_track();  // the calling thread's id (OS tid where there is one)

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }

  // Records e as given (explicit timestamps: replayed or measured elsewhere); track 0 becomes
  // the calling thread, a null name "". Nothing happens while disabled.
  void record(TraceEvent e);
  // The same with the current time (complete spans: the given times) and the calling thread.
  void complete(const char* name, int64_t begin_ns, int64_t end_ns, TraceArgs args = {});
  void instant(const char* name, TraceArgs args = {});
  void counter(const char* name, double value);
  void async_begin(const char* name, uint64_t id, TraceArgs args = {});
  void async_end(const char* name, uint64_t id, TraceArgs args = {});

  // A timed scope (what TraceSpan uses). span_begin writes atrace "B" at once so the ftrace
  // slice has its real length; span_end records the complete span and writes "E" to the same
  // writer, even if the log was disabled in between, so B/E always pair up.
  struct SpanStart {
    int64_t begin_ns = 0;
    AtraceWriter* atrace = nullptr;
  };
  SpanStart span_begin(const char* name);
  void span_end(const char* name, const SpanStart& start, const TraceArgs& args);

  // Mirrors every event recorded from now on to w. Once per log (a second call, or a null w,
  // is an error): the writer then lives as long as the log, so recording threads never see
  // it replaced or freed. Atrace lines carry no args; counters are rounded to integers.
  Result<void> attach_atrace(std::unique_ptr<AtraceWriter> w);
  AtraceWriter* atrace() const { return atrace_.load(std::memory_order_acquire); }

  // The kept events, by ts_ns (ties in recording order).
  std::vector<TraceEvent> snapshot() const;
  // Every event accepted since create()/clear(), and how many of those newer ones overwrote.
  // Once writers are quiet, recorded() == snapshot().size() + dropped().
  uint64_t recorded() const;
  uint64_t dropped() const;
  size_t capacity() const { return capacity_; }
  // Forgets every event recorded so far (events recorded during the call may survive it).
  void clear();

  // {"traceEvents":[...]} with ts/dur in µs from the earliest kept event. Spans "X", instants
  // "i", counters "C" (args {name: value}), async "b"/"e" with cat and a hex-string id (JSON
  // numbers lose 64-bit ids). Non-finite values are written as null; otherData.dropped says
  // how much history the ring lost.
  std::string chrome_json() const;

 private:
  // Event t (t-th claim since create) lives in slot t % capacity. seq: 0 never written,
  // 2t+1 event t being written, 2t+2 event t complete. The event is spread over atomic words
  // so that a reader racing a writer reads stale words, never undefined behaviour.
  static constexpr int kSlotWords = 6 + 2 * kMaxTraceArgs;
  struct alignas(64) Slot {  // one cache line pair per slot: writers do not share lines
    std::atomic<uint64_t> seq;
    std::atomic<uint64_t> words[kSlotWords];
  };

  TraceLog(std::unique_ptr<Slot[]> ring, size_t capacity, int pid);
  static void store_event(Slot& slot, uint64_t ticket, const TraceEvent& e);
  // Event `ticket` from its slot, or false when the slot holds another (or a torn) one.
  static bool load_event(const Slot& slot, uint64_t ticket, TraceEvent* out);
  void push(const TraceEvent& e);
  void mirror(const TraceEvent& e) const;
  // The kept events sorted by ts_ns, and recorded() at the same instant.
  std::vector<TraceEvent> sorted_copy(uint64_t* written) const;

  std::unique_ptr<Slot[]> ring_;
  const size_t capacity_;
  const int pid_;
  std::atomic<bool> enabled_{true};
  std::atomic<AtraceWriter*> atrace_{nullptr};
  std::mutex attach_mu_;                        // attach_atrace only
  std::unique_ptr<AtraceWriter> atrace_owner_;  // set once, under attach_mu_

  alignas(64) std::atomic<uint64_t> next_ticket_{0};  // events claimed since create()
  std::atomic<uint64_t> first_ticket_{0};              // the first one after the last clear()
};

// Times a scope into a log. Null or disabled log: one branch here and one in the destructor.
class TraceSpan {
 public:
  TraceSpan(TraceLog* log, const char* name) : name_(name) {
    if (log && log->enabled()) {
      log_ = log;
      start_ = log->span_begin(name);
    }
  }
  ~TraceSpan() {
    if (log_) log_->span_end(name_, start_, args_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

  // Attaches an arg reported with the span (e.g. tokens processed, known only at the end).
  void arg(const char* key, double value) {
    if (log_) args_.add(key, value);
  }

 private:
  TraceLog* log_ = nullptr;
  const char* name_;
  TraceLog::SpanStart start_;
  TraceArgs args_;
};

// Systrace marker lines for Linux ftrace / Android atrace (Perfetto and systrace read them),
// one write() per line so lines from several threads never interleave:
//   B|pid|name   E|pid   C|pid|name|value   S|pid|name|cookie   F|pid|name|cookie
// '|' and line breaks in names become '_' (they would split the line); names are cut to fit
// kMaxLine. Cookies are written as signed 64-bit decimals (how Perfetto parses them), so
// every 64-bit id round-trips. Any writable file works, which is how the tests check it.
class AtraceWriter {
 public:
  static constexpr const char* kTracefsMarker = "/sys/kernel/tracing/trace_marker";
  static constexpr const char* kDebugfsMarker = "/sys/kernel/debug/tracing/trace_marker";
  static constexpr size_t kMaxLine = 512;

  // Opens an existing file for writing (never creates one: a missing trace_marker means no
  // tracefs). Errors: not writable, not found, a directory.
  static Result<std::unique_ptr<AtraceWriter>> open(const std::string& path);
  // kTracefsMarker, else kDebugfsMarker.
  static Result<std::unique_ptr<AtraceWriter>> open_default();
  ~AtraceWriter();
  AtraceWriter(const AtraceWriter&) = delete;
  AtraceWriter& operator=(const AtraceWriter&) = delete;

  // Each returns whether the whole line was written. A failed line is lost and counted:
  // tracing is best effort and the caller has nothing better to do with the error.
  bool begin(std::string_view name);
  bool end();
  bool counter(std::string_view name, int64_t value);
  bool async_begin(std::string_view name, uint64_t cookie);
  bool async_end(std::string_view name, uint64_t cookie);

  uint64_t write_errors() const { return errors_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }
  int pid() const { return pid_; }

 private:
  AtraceWriter(int fd, int pid, std::string path) : fd_(fd), pid_(pid), path_(std::move(path)) {}
  bool write_line(char tag, std::optional<std::string_view> name, std::optional<int64_t> number);

  const int fd_;
  const int pid_;
  const std::string path_;
  std::atomic<uint64_t> errors_{0};
};

}  // namespace pllm
