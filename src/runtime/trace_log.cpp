// TraceLog (declared in trace_log.h): the ring and its Chrome JSON export. AtraceWriter is in
// trace_atrace.cpp.
#include "runtime/trace_log.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <functional>
#include <new>
#include <thread>
#include <utility>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

namespace pllm {
namespace {

constexpr const char* kCategory = "pllm";

uint32_t os_thread_id() {
#if defined(__linux__)
  // The kernel tid: the same number Perfetto shows for this thread in a system trace.
  return uint32_t(::syscall(SYS_gettid));
#else
  return uint32_t(std::hash<std::thread::id>{}(std::this_thread::get_id()));
#endif
}

// ---- JSON text, written by hand: no allocation per field and no locale in the numbers.

void append_string(std::string& out, const char* s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char* p = s; *p; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {  // JSON has no NaN or infinity
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// ns as µs with three decimals: exact where a double would round large offsets.
void append_us(std::string& out, uint64_t ns) {
  append_int(out, ns / 1000);
  const auto frac = unsigned(ns % 1000);
  const char digits[4] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10)};
  out.append(digits, 4);
}

void append_args(std::string& out, const TraceEvent& e) {
  out += ",\"args\":{";
  bool first = true;
  const auto field = [&](const char* key, double value) {
    if (!first) out += ',';
    first = false;
    append_string(out, key);
    out += ':';
    append_double(out, value);
  };
  if (e.kind == TraceKind::counter) field(e.name, e.value);  // the counter's own series
  for (int i = 0; i < e.args.size(); ++i)
    if (e.args[i].key) field(e.args[i].key, e.args[i].value);
  out += '}';
}

const char* phase_of(TraceKind kind) {
  switch (kind) {
    case TraceKind::complete: return "X";
    case TraceKind::instant: return "i";
    case TraceKind::counter: return "C";
    case TraceKind::async_begin: return "b";
    case TraceKind::async_end: return "e";
  }
  return "i";
}

void append_event(std::string& out, const TraceEvent& e, int64_t t0_ns, int pid) {
  out += "{\"name\":";
  append_string(out, e.name);
  out += ",\"cat\":\"";
  out += kCategory;
  out += "\",\"ph\":\"";
  out += phase_of(e.kind);
  out += "\",\"ts\":";
  // Unsigned difference: exact for any pair of int64 times with ts >= t0 (t0 is the minimum).
  append_us(out, uint64_t(e.ts_ns) - uint64_t(t0_ns));
  if (e.kind == TraceKind::complete) {
    out += ",\"dur\":";
    append_us(out, e.end_ns > e.ts_ns ? uint64_t(e.end_ns) - uint64_t(e.ts_ns) : 0);
  }
  if (e.kind == TraceKind::instant) out += ",\"s\":\"t\"";  // thread-scoped instant
  if (e.kind == TraceKind::async_begin || e.kind == TraceKind::async_end) {
    char hex[20];
    const auto r = std::to_chars(hex, hex + sizeof hex, e.id, 16);
    out += ",\"id\":\"0x";
    out.append(hex, r.ptr);
    out += '"';
  }
  out += ",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":";
  append_int(out, e.track);
  append_args(out, e);
  out += '}';
}

// Atrace counters are integers. Values that do not fit are not written rather than clamped
// to a misleading number.
std::optional<int64_t> counter_as_int(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 9.0e18) return std::nullopt;
  return int64_t(std::llround(v));
}

}  // namespace

// ---- TraceLog

TraceLog::TraceLog(std::unique_ptr<Slot[]> ring, size_t capacity, int pid)
    : ring_(std::move(ring)), capacity_(capacity), pid_(pid) {}

TraceLog::~TraceLog() = default;

Result<std::unique_ptr<TraceLog>> TraceLog::create(size_t capacity) {
  if (capacity < 1 || capacity > kMaxCapacity)
    return make_error(Status::invalid_argument,
                      "trace log capacity must be in [1, " + std::to_string(kMaxCapacity) + "], got " +
                          std::to_string(capacity));
  // Value-initialised: every seq starts at 0, "never written".
  std::unique_ptr<Slot[]> ring(new (std::nothrow) Slot[capacity]());
  if (!ring) return make_error(Status::out_of_memory, "trace log: cannot allocate " + std::to_string(capacity) + " events");
  std::unique_ptr<TraceLog> log(new (std::nothrow) TraceLog(std::move(ring), capacity, int(::getpid())));
  if (!log) return make_error(Status::out_of_memory, "trace log: cannot allocate");
  return log;
}

int64_t TraceLog::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint32_t TraceLog::thread_track() {
  // A syscall per event would cost more than the event; the id never changes for a thread.
  thread_local const uint32_t id = std::max<uint32_t>(os_thread_id(), 1);
  return id;
}

void TraceLog::store_event(Slot& slot, uint64_t ticket, const TraceEvent& e) {
  slot.seq.store(2 * ticket + 1, std::memory_order_relaxed);
  // Release on every word (not a fence: ThreadSanitizer does not model fences) orders the odd
  // seq before it, so a reader that loads any word of this event (acquire) then sees the odd
  // seq, or later, on its re-check and discards the event. Plain stores on x86.
  constexpr auto release = std::memory_order_release;
  const int n = e.args.size();
  slot.words[0].store(uint64_t(e.kind) | uint64_t(n) << 8 | uint64_t(e.track) << 32, release);
  slot.words[1].store(reinterpret_cast<uintptr_t>(e.name), release);
  slot.words[2].store(uint64_t(e.ts_ns), release);
  slot.words[3].store(uint64_t(e.end_ns), release);
  slot.words[4].store(e.id, release);
  slot.words[5].store(std::bit_cast<uint64_t>(e.value), release);
  for (int i = 0; i < n; ++i) {
    slot.words[6 + 2 * i].store(reinterpret_cast<uintptr_t>(e.args[i].key), release);
    slot.words[7 + 2 * i].store(std::bit_cast<uint64_t>(e.args[i].value), release);
  }
  slot.seq.store(2 * ticket + 2, std::memory_order_release);
}

bool TraceLog::load_event(const Slot& slot, uint64_t ticket, TraceEvent* out) {
  constexpr auto acquire = std::memory_order_acquire;
  const uint64_t complete = 2 * ticket + 2;
  if (slot.seq.load(acquire) != complete) return false;  // not there (yet), or overwritten
  uint64_t w[kSlotWords];
  for (int i = 0; i < 6; ++i) w[i] = slot.words[i].load(acquire);
  const int n = std::min(int((w[0] >> 8) & 0xff), kMaxTraceArgs);  // torn words: still in bounds
  for (int i = 6; i < 6 + 2 * n; ++i) w[i] = slot.words[i].load(acquire);
  // The acquire loads above keep this re-check after them (see store_event).
  if (slot.seq.load(std::memory_order_relaxed) != complete) return false;  // overwritten meanwhile
  TraceEvent e;
  e.kind = TraceKind(w[0] & 0xff);
  e.track = uint32_t(w[0] >> 32);
  e.name = reinterpret_cast<const char*>(uintptr_t(w[1]));
  e.ts_ns = int64_t(w[2]);
  e.end_ns = int64_t(w[3]);
  e.id = w[4];
  e.value = std::bit_cast<double>(w[5]);
  for (int i = 0; i < n; ++i)
    e.args.add(reinterpret_cast<const char*>(uintptr_t(w[6 + 2 * i])), std::bit_cast<double>(w[7 + 2 * i]));
  *out = e;
  return true;
}

void TraceLog::push(const TraceEvent& e) {
  const uint64_t ticket = next_ticket_.fetch_add(1, std::memory_order_relaxed);
  Slot& slot = ring_[ticket % capacity_];
  // The slot is ours once the previous lap's event in it is complete. Only a writer stalled
  // for a whole lap of the ring makes anyone wait here.
  const uint64_t free_seq = ticket >= capacity_ ? 2 * (ticket - capacity_) + 2 : 0;
  while (slot.seq.load(std::memory_order_acquire) != free_seq) std::this_thread::yield();
  store_event(slot, ticket, e);
}

void TraceLog::mirror(const TraceEvent& e) const {
  AtraceWriter* w = atrace();
  if (!w) return;
  switch (e.kind) {
    case TraceKind::complete:
    case TraceKind::instant:
      // Already over by the time it is recorded: ftrace stamps lines on arrival, so the best
      // it can show is a zero-length slice at the right place. TraceSpan gives real lengths.
      w->begin(e.name);
      w->end();
      break;
    case TraceKind::counter:
      if (const auto v = counter_as_int(e.value)) w->counter(e.name, *v);
      break;
    case TraceKind::async_begin: w->async_begin(e.name, e.id); break;
    case TraceKind::async_end: w->async_end(e.name, e.id); break;
  }
}

void TraceLog::record(TraceEvent e) {
  if (!enabled()) return;
  if (e.track == 0) e.track = thread_track();
  if (!e.name) e.name = "";
  push(e);
  mirror(e);
}

void TraceLog::complete(const char* name, int64_t begin_ns, int64_t end_ns, TraceArgs args) {
  if (!enabled()) return;
  TraceEvent e;
  e.kind = TraceKind::complete;
  e.name = name;
  e.ts_ns = begin_ns;
  e.end_ns = end_ns;
  e.args = args;
  record(e);
}

void TraceLog::instant(const char* name, TraceArgs args) {
  if (!enabled()) return;
  TraceEvent e;
  e.kind = TraceKind::instant;
  e.name = name;
  e.ts_ns = now_ns();
  e.args = args;
  record(e);
}

void TraceLog::counter(const char* name, double value) {
  if (!enabled()) return;
  TraceEvent e;
  e.kind = TraceKind::counter;
  e.name = name;
  e.ts_ns = now_ns();
  e.value = value;
  record(e);
}

void TraceLog::async_begin(const char* name, uint64_t id, TraceArgs args) {
  if (!enabled()) return;
  TraceEvent e;
  e.kind = TraceKind::async_begin;
  e.name = name;
  e.ts_ns = now_ns();
  e.id = id;
  e.args = args;
  record(e);
}

void TraceLog::async_end(const char* name, uint64_t id, TraceArgs args) {
  if (!enabled()) return;
  TraceEvent e;
  e.kind = TraceKind::async_end;
  e.name = name;
  e.ts_ns = now_ns();
  e.id = id;
  e.args = args;
  record(e);
}

TraceLog::SpanStart TraceLog::span_begin(const char* name) {
  SpanStart s;
  s.atrace = atrace();
  if (s.atrace) s.atrace->begin(name ? name : "");
  s.begin_ns = now_ns();  // after the marker write, so the span does not include its cost
  return s;
}

void TraceLog::span_end(const char* name, const SpanStart& start, const TraceArgs& args) {
  const int64_t end_ns = now_ns();
  if (enabled()) {
    TraceEvent e;
    e.kind = TraceKind::complete;
    e.track = thread_track();
    e.name = name ? name : "";
    e.ts_ns = start.begin_ns;
    e.end_ns = end_ns;
    e.args = args;
    push(e);  // not mirror(): the B line went out at span_begin
  }
  if (start.atrace) start.atrace->end();
}

Result<void> TraceLog::attach_atrace(std::unique_ptr<AtraceWriter> w) {
  if (!w) return make_error(Status::invalid_argument, "attach_atrace: null writer");
  std::lock_guard<std::mutex> lock(attach_mu_);
  if (atrace_owner_) return make_error(Status::invalid_argument, "attach_atrace: a writer is already attached");
  atrace_owner_ = std::move(w);
  atrace_.store(atrace_owner_.get(), std::memory_order_release);
  return {};
}

std::vector<TraceEvent> TraceLog::sorted_copy(uint64_t* written) const {
  const uint64_t end = next_ticket_.load(std::memory_order_acquire);
  const uint64_t cleared = std::min(end, first_ticket_.load(std::memory_order_acquire));
  const uint64_t first = std::max(cleared, end > capacity_ ? end - capacity_ : uint64_t(0));
  *written = end - cleared;
  std::vector<TraceEvent> out;
  out.reserve(size_t(end - first));
  TraceEvent e;
  for (uint64_t t = first; t < end; ++t)
    if (load_event(ring_[t % capacity_], t, &e)) out.push_back(e);
  // Stable: events with equal times (a request's end and the next one's begin) keep the
  // order they were recorded in.
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

std::vector<TraceEvent> TraceLog::snapshot() const {
  uint64_t written = 0;
  return sorted_copy(&written);
}

uint64_t TraceLog::recorded() const {
  const uint64_t end = next_ticket_.load(std::memory_order_acquire);
  return end - std::min(end, first_ticket_.load(std::memory_order_acquire));
}

uint64_t TraceLog::dropped() const {
  const uint64_t n = recorded();
  return n > capacity_ ? n - capacity_ : 0;
}

void TraceLog::clear() {
  // Tickets are never reused (a writer mid-copy still owns its slot); clearing only moves
  // the start of what counts.
  first_ticket_.store(next_ticket_.load(std::memory_order_acquire), std::memory_order_release);
}

std::string TraceLog::chrome_json() const {
  uint64_t written = 0;
  const std::vector<TraceEvent> events = sorted_copy(&written);
  const uint64_t dropped = written > capacity_ ? written - capacity_ : 0;
  std::string out;
  out.reserve(64 + events.size() * 128);
  out += "{\"traceEvents\":[";
  const int64_t t0 = events.empty() ? 0 : events.front().ts_ns;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i) out += ",\n";
    append_event(out, events[i], t0, pid_);
  }
  out += "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped\":";
  append_int(out, dropped);
  out += "}}";
  return out;
}

}  // namespace pllm
