// TraceLog (runtime/trace_log.h): the bounded ring, its order and drop count, the Chrome JSON
// export (parsed back with nlohmann::json), concurrent writers (run under TSan too), and
// AtraceWriter against a stand-in file instead of the real trace_marker.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/trace_log.h"

namespace pllm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::unique_ptr<TraceLog> make_log(size_t capacity) {
  auto r = TraceLog::create(capacity);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : nullptr;
}

TraceEvent event(TraceKind kind, const char* name, int64_t ts_ns) {
  TraceEvent e;
  e.kind = kind;
  e.name = name;
  e.ts_ns = ts_ns;
  return e;
}

json parse_events(const TraceLog& log) {
  const json doc = json::parse(log.chrome_json());  // throws (fails the test) on bad JSON
  EXPECT_TRUE(doc.contains("traceEvents"));
  return doc["traceEvents"];
}

TEST(TraceLog, CreateChecksCapacity) {
  EXPECT_FALSE(TraceLog::create(0).ok());
  EXPECT_FALSE(TraceLog::create(TraceLog::kMaxCapacity + 1).ok());
  auto one = TraceLog::create(1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.value()->capacity(), 1u);
  EXPECT_TRUE(one.value()->enabled());
}

TEST(TraceLog, RingKeepsNewestAndCountsDrops) {
  auto log = make_log(3);
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (int i = 0; i < 5; ++i) log->record(event(TraceKind::instant, names[i], 100 * (i + 1)));
  EXPECT_EQ(log->recorded(), 5u);
  EXPECT_EQ(log->dropped(), 2u);
  const auto events = log->snapshot();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_STREQ(events[0].name, "c");
  EXPECT_STREQ(events[1].name, "d");
  EXPECT_STREQ(events[2].name, "e");
  EXPECT_EQ(events[2].ts_ns, 500);

  // Wrapping several times still keeps exactly the last `capacity`.
  for (int i = 0; i < 10; ++i) log->record(event(TraceKind::instant, names[i % 5], 1000 + i));
  const auto later = log->snapshot();
  ASSERT_EQ(later.size(), 3u);
  EXPECT_EQ(later[0].ts_ns, 1007);
  EXPECT_EQ(later[2].ts_ns, 1009);
  EXPECT_EQ(log->dropped(), 12u);

  log->clear();
  EXPECT_TRUE(log->snapshot().empty());
  EXPECT_EQ(log->recorded(), 0u);
  EXPECT_EQ(log->dropped(), 0u);
}

TEST(TraceLog, SnapshotIsInTimeOrder) {
  auto log = make_log(16);
  // A span is recorded when it ends, after events that happened inside it.
  log->record(event(TraceKind::instant, "inside", 200));
  log->record(event(TraceKind::counter, "kv_used", 300));
  TraceEvent span = event(TraceKind::complete, "decode", 100);
  span.end_ns = 400;
  log->record(span);
  log->record(event(TraceKind::instant, "same_time_first", 500));
  log->record(event(TraceKind::instant, "same_time_second", 500));
  const auto events = log->snapshot();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_STREQ(events[0].name, "decode");
  EXPECT_STREQ(events[1].name, "inside");
  EXPECT_STREQ(events[2].name, "kv_used");
  EXPECT_STREQ(events[3].name, "same_time_first");
  EXPECT_STREQ(events[4].name, "same_time_second");
  for (const auto& e : events) EXPECT_NE(e.track, 0u);  // filled with the recording thread
}

TEST(TraceLog, ArgsBeyondTheLimitAreDropped) {
  TraceArgs args{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}};
  EXPECT_EQ(args.size(), kMaxTraceArgs);
  EXPECT_FALSE(args.add("f", 6));
  EXPECT_STREQ(args[3].key, "d");
  EXPECT_EQ(args[3].value, 4.0);
}

TEST(TraceLog, ChromeJsonFields) {
  auto log = make_log(32);
  const int64_t t0 = 1'000'000'000;
  TraceEvent begin7 = event(TraceKind::async_begin, "request", t0);
  begin7.id = 7;
  begin7.args = {{"prompt_tokens", 12}};
  log->record(begin7);
  TraceEvent prefill = event(TraceKind::complete, "prefill", t0 + 1500);
  prefill.end_ns = t0 + 4750;
  prefill.track = 42;
  prefill.args = {{"batch", 3}, {"tokens", 12}};
  log->record(prefill);
  TraceEvent kv = event(TraceKind::counter, "kv_used", t0 + 2000);
  kv.value = 42.5;
  log->record(kv);
  log->record(event(TraceKind::instant, "frame_miss", t0 + 3000));
  TraceEvent begin_big = event(TraceKind::async_begin, "request", t0 + 3500);
  begin_big.id = 0xfedcba9876543210ull;  // beyond 2^53: must survive as a string
  log->record(begin_big);
  TraceEvent end7 = event(TraceKind::async_end, "request", t0 + 6000);
  end7.id = 7;
  log->record(end7);
  TraceEvent end_big = event(TraceKind::async_end, "request", t0 + 7001);
  end_big.id = begin_big.id;
  log->record(end_big);

  const json events = parse_events(*log);
  ASSERT_EQ(events.size(), 7u);
  // ts in µs from the first event.
  EXPECT_EQ(events[0]["ph"], "b");
  EXPECT_DOUBLE_EQ(events[0]["ts"].get<double>(), 0.0);
  EXPECT_EQ(events[0]["id"], "0x7");
  EXPECT_EQ(events[0]["cat"], "pllm");
  EXPECT_DOUBLE_EQ(events[0]["args"]["prompt_tokens"].get<double>(), 12.0);

  EXPECT_EQ(events[1]["ph"], "X");
  EXPECT_EQ(events[1]["name"], "prefill");
  EXPECT_DOUBLE_EQ(events[1]["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(events[1]["dur"].get<double>(), 3.25);
  EXPECT_EQ(events[1]["tid"], 42);
  EXPECT_EQ(events[1]["pid"], int(::getpid()));
  EXPECT_DOUBLE_EQ(events[1]["args"]["batch"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(events[1]["args"]["tokens"].get<double>(), 12.0);

  EXPECT_EQ(events[2]["ph"], "C");
  EXPECT_DOUBLE_EQ(events[2]["ts"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(events[2]["args"]["kv_used"].get<double>(), 42.5);

  EXPECT_EQ(events[3]["ph"], "i");
  EXPECT_EQ(events[3]["name"], "frame_miss");
  EXPECT_DOUBLE_EQ(events[3]["ts"].get<double>(), 3.0);

  EXPECT_DOUBLE_EQ(events[6]["ts"].get<double>(), 7.001);

  // Every request id has exactly one begin and one end, begin first, same cat.
  std::map<uint64_t, std::vector<std::string>> phases;
  for (const auto& e : events) {
    if (e["ph"] != "b" && e["ph"] != "e") continue;
    EXPECT_EQ(e["cat"], "pllm");
    phases[std::stoull(e["id"].get<std::string>(), nullptr, 16)].push_back(e["ph"]);
  }
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[7], (std::vector<std::string>{"b", "e"}));
  EXPECT_EQ(phases[0xfedcba9876543210ull], (std::vector<std::string>{"b", "e"}));
}

TEST(TraceLog, ChromeJsonEscapesNamesAndNonFiniteValues) {
  auto log = make_log(8);
  const char* odd = "say \"hi\"\\ \n\t\x01 done";
  log->record(event(TraceKind::instant, odd, 10));
  TraceEvent nan = event(TraceKind::counter, "tokens_per_s", 20);
  nan.value = std::numeric_limits<double>::quiet_NaN();
  log->record(nan);
  TraceEvent null_name = event(TraceKind::instant, nullptr, 30);
  log->record(null_name);
  const json events = parse_events(*log);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["name"].get<std::string>(), std::string(odd));
  EXPECT_TRUE(events[1]["args"]["tokens_per_s"].is_null());
  EXPECT_EQ(events[2]["name"], "");
}

TEST(TraceLog, EmptyLogIsValidJson) {
  auto log = make_log(4);
  EXPECT_TRUE(parse_events(*log).empty());
}

TEST(TraceLog, DroppedCountIsExported) {
  auto log = make_log(2);
  for (int i = 0; i < 5; ++i) log->record(event(TraceKind::instant, "x", i));
  const json doc = json::parse(log->chrome_json());
  EXPECT_EQ(doc["otherData"]["dropped"], 3);
  EXPECT_EQ(doc["traceEvents"].size(), 2u);
}

TEST(TraceLog, HelpersUseTheClockAndThisThread) {
  auto log = make_log(16);
  const int64_t before = TraceLog::now_ns();
  log->async_begin("request", 5, {{"max_tokens", 64}});
  log->counter("batch_size", 3);
  log->instant("governor_step");
  {
    TraceSpan span(log.get(), "decode_step");
    span.arg("rows", 3);
  }
  log->complete("sample", before, before + 10);
  log->async_end("request", 5);
  const int64_t after = TraceLog::now_ns();

  const auto events = log->snapshot();
  ASSERT_EQ(events.size(), 6u);
  for (const auto& e : events) {
    EXPECT_GE(e.ts_ns, before);
    EXPECT_LE(e.ts_ns, after);
    EXPECT_EQ(e.track, TraceLog::thread_track());
  }
  const auto span = std::find_if(events.begin(), events.end(),
                                 [](const TraceEvent& e) { return std::string(e.name) == "decode_step"; });
  ASSERT_NE(span, events.end());
  EXPECT_EQ(span->kind, TraceKind::complete);
  EXPECT_GE(span->end_ns, span->ts_ns);
  ASSERT_EQ(span->args.size(), 1);
  EXPECT_STREQ(span->args[0].key, "rows");
  EXPECT_EQ(events.back().kind, TraceKind::async_end);
  EXPECT_EQ(events.back().id, 5u);
}

TEST(TraceLog, DisabledLogRecordsNothing) {
  auto log = make_log(16);
  log->set_enabled(false);
  EXPECT_FALSE(log->enabled());
  log->record(event(TraceKind::instant, "x", 1));
  log->instant("x");
  log->counter("c", 1);
  log->complete("s", 1, 2);
  log->async_begin("r", 1);
  log->async_end("r", 1);
  { TraceSpan span(log.get(), "span"); }
  EXPECT_EQ(log->recorded(), 0u);
  EXPECT_TRUE(log->snapshot().empty());

  log->set_enabled(true);
  log->instant("y");
  EXPECT_EQ(log->recorded(), 1u);

  TraceSpan null_span(nullptr, "no log");  // must be a no-op, not a crash
  null_span.arg("k", 1);
}

// 4 writers x 10k events into a smaller ring, while a reader snapshots and exports: under TSan
// this checks the locking; everywhere it checks that nothing is lost or duplicated.
TEST(TraceLog, ConcurrentWritersKeepTheNewest) {
  constexpr int kThreads = 4, kPerThread = 10'000;
  constexpr size_t kCapacity = 8192;
  auto log = make_log(kCapacity);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      const auto events = log->snapshot();
      EXPECT_LE(events.size(), kCapacity);
      EXPECT_TRUE(std::is_sorted(events.begin(), events.end(),
                                 [](const TraceEvent& a, const TraceEvent& b) { return a.ts_ns < b.ts_ns; }));
      (void)log->chrome_json();
    }
  });
  std::atomic<int> ready{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      // Start together, so that the writers really overlap instead of running one by one.
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        if (i % 2) {
          log->counter("seq", i);
        } else {
          TraceSpan span(log.get(), "work");
          span.arg("seq", i);
          span.arg("writer", t);
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  done.store(true);
  reader.join();

  const auto events = log->snapshot();
  const uint64_t total = uint64_t(kThreads) * kPerThread;
  EXPECT_EQ(log->recorded(), total);
  EXPECT_EQ(events.size(), kCapacity);
  EXPECT_EQ(log->recorded(), events.size() + log->dropped());

  // Per thread, the kept events are a gap-free run of its sequence that ends at its last event
  // (the ring drops oldest first, and one thread's events reach it in program order).
  std::map<uint32_t, std::vector<int>> seqs;
  for (const auto& e : events) {
    const double seq = e.kind == TraceKind::counter ? e.value : e.args[0].value;
    seqs[e.track].push_back(int(seq));
  }
  EXPECT_LE(seqs.size(), size_t(kThreads));
  size_t kept = 0;
  for (const auto& [track, s] : seqs) {
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.back(), kPerThread - 1) << "track " << track;
    for (size_t i = 1; i < s.size(); ++i) ASSERT_EQ(s[i], s[i - 1] + 1) << "track " << track;
    kept += s.size();
  }
  EXPECT_EQ(kept, kCapacity);
}

// ---- AtraceWriter against a stand-in for trace_marker.

class AtraceFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("pllm_atrace_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    marker_ = dir_ / "trace_marker";
    std::ofstream(marker_).flush();  // trace_marker always exists; the writer never creates it
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string contents() const {
    std::ifstream in(marker_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::unique_ptr<AtraceWriter> open_marker() {
    auto r = AtraceWriter::open(marker_.string());
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : nullptr;
  }

  fs::path dir_, marker_;
  const std::string pid_ = std::to_string(::getpid());
};

TEST_F(AtraceFile, WritesSystraceLines) {
  auto w = open_marker();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->pid(), ::getpid());
  EXPECT_TRUE(w->begin("prefill"));
  EXPECT_TRUE(w->end());
  EXPECT_TRUE(w->counter("kv_used", -17));
  EXPECT_TRUE(w->async_begin("request", 9));
  EXPECT_TRUE(w->async_end("request", 9));
  EXPECT_TRUE(w->begin("a|b\nc"));
  const std::string p = pid_;
  EXPECT_EQ(contents(), "B|" + p + "|prefill\nE|" + p + "\nC|" + p + "|kv_used|-17\nS|" + p + "|request|9\nF|" + p +
                            "|request|9\nB|" + p + "|a_b_c\n");
  EXPECT_EQ(w->write_errors(), 0u);
}

TEST_F(AtraceFile, LongNamesAreCutToOneLine) {
  auto w = open_marker();
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->counter(std::string(4000, 'n'), 123456789));
  const std::string text = contents();
  EXPECT_LE(text.size(), AtraceWriter::kMaxLine);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  EXPECT_TRUE(text.ends_with("n|123456789\n")) << text;
}

TEST_F(AtraceFile, TraceLogMirrorsEveryEvent) {
  auto log = make_log(16);
  ASSERT_TRUE(log->attach_atrace(open_marker()).ok());
  EXPECT_FALSE(log->attach_atrace(open_marker()).ok());  // once only
  EXPECT_FALSE(log->attach_atrace(nullptr).ok());
  log->async_begin("request", 3);
  {
    TraceSpan span(log.get(), "decode");
    log->counter("tokens_per_s", 12.6);  // atrace counters are integers
  }
  log->instant("thermal_step");
  log->counter("bad", std::numeric_limits<double>::infinity());  // not representable: skipped
  log->async_end("request", 3);
  log->set_enabled(false);
  log->instant("not mirrored");
  const std::string p = pid_;
  EXPECT_EQ(contents(), "S|" + p + "|request|3\nB|" + p + "|decode\nC|" + p + "|tokens_per_s|13\nE|" + p + "\nB|" +
                            p + "|thermal_step\nE|" + p + "\nF|" + p + "|request|3\n");
  EXPECT_EQ(log->recorded(), 6u);  // the ring still has everything, infinite counter included
}

TEST_F(AtraceFile, SpanStartedBeforeDisableStillEnds) {
  auto log = make_log(4);
  ASSERT_TRUE(log->attach_atrace(open_marker()).ok());
  {
    TraceSpan span(log.get(), "step");
    log->set_enabled(false);
  }
  EXPECT_EQ(contents(), "B|" + pid_ + "|step\nE|" + pid_ + "\n");
  EXPECT_EQ(log->recorded(), 0u);
}

TEST_F(AtraceFile, ConcurrentLinesDoNotInterleave) {
  auto w = open_marker();
  ASSERT_TRUE(w);
  constexpr int kThreads = 4, kLines = 500;
  const char* names[kThreads] = {"c0", "c1", "c2", "c3"};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLines; ++i) w->counter(names[t], i);
    });
  for (auto& th : threads) th.join();
  std::istringstream in(contents());
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    ++count;
    EXPECT_TRUE(line.starts_with("C|" + pid_ + "|c")) << line;
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 3) << line;
  }
  EXPECT_EQ(count, kThreads * kLines);
}

TEST_F(AtraceFile, UnwritablePathsAreErrors) {
  EXPECT_FALSE(AtraceWriter::open(dir_.string()).ok());                 // a directory
  EXPECT_FALSE(AtraceWriter::open("/proc/nonexistent/x").ok());         // no such path
  EXPECT_FALSE(AtraceWriter::open((dir_ / "missing").string()).ok());  // never created
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
  const auto r = AtraceWriter::open("/proc/nonexistent/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::io_error);
  EXPECT_NE(r.error().message.find("/proc/nonexistent/x"), std::string::npos);
  if (::geteuid() != 0) {  // root writes through file modes
    fs::permissions(marker_, fs::perms::owner_read);
    EXPECT_FALSE(AtraceWriter::open(marker_.string()).ok());
  }
  // The real markers may or may not be writable here; either way an answer, not a crash.
  const auto real = AtraceWriter::open_default();
  if (!real.ok()) {
    EXPECT_EQ(real.error().code, Status::io_error);
  }
}

}  // namespace
}  // namespace pllm
