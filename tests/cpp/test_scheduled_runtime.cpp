// ScheduledRuntime (runtime/scheduled_runtime.h) on the real SmolLM2 file (skipped if absent):
// scheduled, batched, preempted and paused requests give the greedy tokens of a plain solo
// run; control requests end what they should; frame mode and the governor's caps bound the
// steps; the driver thread serves requests submitted from other threads (this binary also
// runs under TSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "model/model.h"
#include "real_model.h"
#include "runtime/prefix_cache.h"
#include "runtime/scheduled_runtime.h"

namespace pllm {
namespace {

std::shared_ptr<const Model> load_model() { return shared_real_model(); }

std::vector<int32_t> prompt_of(int seq, int len) { return synthetic_prompt(seq, len, 5); }

SessionConfig session_cfg(KvType kv = KvType::f16) {
  SessionConfig c;
  c.n_ctx = 256;
  c.n_batch = 16;
  c.kv.type = kv;
  return c;
}

SamplingConfig greedy() {
  SamplingConfig s;
  s.temperature = 0;
  return s;
}

// The plain path: one private session, eval the prompt, then argmax and feed back.
std::vector<int32_t> solo_greedy(const std::shared_ptr<const Model>& m, const std::vector<int32_t>& prompt, int n,
                                 KvType kv = KvType::f16) {
  SessionConfig c = session_cfg(kv);
  c.n_threads = 1;
  auto s = Session::create(m, c);
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE((*s)->eval_last(prompt).ok());
  std::vector<int32_t> out;
  const int nv = m->config().n_vocab;
  for (int i = 0; i < n; ++i) {
    const float* l = (*s)->last_logits();
    const int32_t t = int32_t(std::max_element(l, l + nv) - l);
    if (m->tokenizer().is_end_of_generation(t)) break;
    out.push_back(t);
    EXPECT_TRUE((*s)->eval_last(std::span<const int32_t>(&t, 1)).ok());
  }
  return out;
}

// Collects each request's tokens and end event.
struct Recorder {
  std::mutex mu;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, RuntimeEvent> ends;
  std::vector<uint64_t> first_token_order;  // requests in the order of their first token
  RuntimeCallback callback() {
    return [this](const RuntimeEvent& e) {
      std::lock_guard lk(mu);
      if (e.kind == RuntimeEvent::Kind::token) {
        if (e.index == 0) first_token_order.push_back(e.request);
        tokens[e.request].push_back(e.token);
      } else {
        ends[e.request] = e;
      }
    };
  }
};

RuntimeRequest request(std::vector<int32_t> prompt, int max_tokens, Recorder& rec,
                       RequestClass klass = RequestClass::interactive) {
  RuntimeRequest r;
  r.klass = klass;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling = greedy();
  r.on_event = rec.callback();
  return r;
}

std::unique_ptr<ScheduledRuntime> make_runtime(RuntimeConfig cfg = {}) {
  auto engine = Engine::create(2);
  EXPECT_TRUE(engine.ok());
  cfg.scheduler.prefill_chunk = 16;
  auto rt = ScheduledRuntime::create(load_model(), *engine, std::move(cfg));
  EXPECT_TRUE(rt.ok()) << (rt.ok() ? "" : rt.error().message);
  return rt.ok() ? std::move(rt).value() : nullptr;
}

void run_until_idle(ScheduledRuntime& rt, int max_steps = 10000) {
  for (int i = 0; i < max_steps && rt.pending() > 0; ++i) {
    auto r = rt.step();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  ASSERT_EQ(rt.pending(), 0u);
}

class RuntimeReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!load_model()) GTEST_SKIP() << "real model not found at " << real_model_path();
  }
};

TEST_F(RuntimeReal, ManySessionsGiveTheirSoloTokens) {
  auto rt = make_runtime();
  Recorder rec;
  const int lens[] = {5, 37, 12, 23};
  const KvType kvs[] = {KvType::f16, KvType::q8, KvType::f32, KvType::f16};
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto key = rt->add_session(session_cfg(kvs[i]));
    ASSERT_TRUE(key.ok());
    auto id = rt->submit(*key, request(prompt_of(i, lens[i]), 8, rec, i % 2 ? RequestClass::background
                                                                               : RequestClass::interactive));
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.push_back(*id);
  }
  run_until_idle(*rt);
  for (int i = 0; i < 4; ++i) {
    const auto want = solo_greedy(load_model(), prompt_of(i, lens[i]), 8, kvs[i]);
    EXPECT_EQ(rec.tokens[ids[size_t(i)]], want) << "session " << i;
    ASSERT_TRUE(rec.ends.count(ids[size_t(i)]));
    const RuntimeEvent& end = rec.ends[ids[size_t(i)]];
    EXPECT_EQ(end.n_generated, int(want.size()));
    EXPECT_TRUE(end.reason == EndReason::done || end.reason == EndReason::eos);
  }
}

TEST_F(RuntimeReal, AFollowUpRequestContinuesTheConversation) {
  auto rt = make_runtime();
  Recorder rec;
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  const auto p = prompt_of(1, 20);
  auto a = rt->submit(*key, request(p, 4, rec));
  ASSERT_TRUE(a.ok());
  run_until_idle(*rt);
  auto b = rt->submit(*key, request({}, 4, rec));  // no prompt: goes on from where it stopped
  ASSERT_TRUE(b.ok());
  run_until_idle(*rt);
  std::vector<int32_t> both = rec.tokens[*a];
  both.insert(both.end(), rec.tokens[*b].begin(), rec.tokens[*b].end());
  EXPECT_EQ(both, solo_greedy(load_model(), p, 8));
}

// Removing a session (an HTTP client gone) ends its requests only: another session's running
// request goes on to its solo tokens (a removal once ended it as kv_exhausted).
TEST_F(RuntimeReal, RemovingASessionLeavesTheOthersRunning) {
  auto rt = make_runtime();
  Recorder rec;
  auto a = rt->add_session(session_cfg());
  auto b = rt->add_session(session_cfg());
  ASSERT_TRUE(a.ok() && b.ok());
  const auto pa = prompt_of(3, 12), pb = prompt_of(4, 15);
  auto ida = rt->submit(*a, request(pa, 16, rec));
  auto idb = rt->submit(*b, request(pb, 8, rec));
  ASSERT_TRUE(ida.ok() && idb.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(rt->step().ok());  // both prompts in, a few tokens out
  ASSERT_TRUE(rt->remove_session(*b).ok());
  run_until_idle(*rt);
  EXPECT_EQ(rec.tokens[*ida], solo_greedy(load_model(), pa, 16));
  ASSERT_TRUE(rec.ends.count(*ida));
  EXPECT_TRUE(rec.ends[*ida].reason == EndReason::done || rec.ends[*ida].reason == EndReason::eos);
  ASSERT_TRUE(rec.ends.count(*idb));
  EXPECT_EQ(rec.ends[*idb].reason, EndReason::reset);
}

TEST_F(RuntimeReal, PausedSessionsResumeWithIdenticalOutput) {
  // A KV budget that holds about two of the three sequences: the scheduler pauses one, its KV
  // moves out and back, and every request still gets its solo tokens.
  RuntimeConfig cfg;
  cfg.kv_budget_tokens = 70;
  auto rt = make_runtime(cfg);
  Recorder rec;
  std::vector<uint64_t> ids;
  std::vector<int64_t> keys;
  for (int i = 0; i < 3; ++i) {
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    keys.push_back(*key);
    auto id = rt->submit(*key, request(prompt_of(10 + i, 20), 10, rec,
                                       i == 2 ? RequestClass::interactive : RequestClass::background));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  // Moved out: the session held context and holds none now, its request still pending.
  int paused_seen = 0;
  std::vector<size_t> held(keys.size(), 0);
  for (int s = 0; s < 2000 && rt->pending() > 0; ++s) {
    ASSERT_TRUE(rt->step().ok());
    for (size_t k = 0; k < keys.size(); ++k) {
      const size_t now = rt->session(keys[k])->history().size();
      paused_seen += held[k] > 0 && now == 0 ? 1 : 0;
      held[k] = now;
    }
  }
  ASSERT_EQ(rt->pending(), 0u);
  EXPECT_GT(paused_seen, 0) << "the budget never made the scheduler move a session out";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(rec.tokens[ids[size_t(i)]], solo_greedy(load_model(), prompt_of(10 + i, 20), 10)) << i;
    EXPECT_NE(rec.ends[ids[size_t(i)]].reason, EndReason::kv_exhausted);
  }
}

TEST_F(RuntimeReal, InteractiveRequestOvertakesBackgroundWork) {
  RuntimeConfig cfg;
  cfg.max_batch_rows = 2;  // three background sessions cannot all run at once
  auto rt = make_runtime(cfg);
  Recorder rec;
  for (int i = 0; i < 3; ++i) {
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    ASSERT_TRUE(rt->submit(*key, request(prompt_of(20 + i, 8), 40, rec, RequestClass::background)).ok());
  }
  for (int s = 0; s < 6; ++s) ASSERT_TRUE(rt->step().ok());
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  auto id = rt->submit(*key, request(prompt_of(30, 8), 3, rec));
  ASSERT_TRUE(id.ok());
  // Its prompt is one chunk: it runs in the next step, and its first token in the one after.
  ASSERT_TRUE(rt->step().ok());
  ASSERT_TRUE(rt->step().ok());
  {
    std::lock_guard lk(rec.mu);
    ASSERT_EQ(rec.tokens[*id].size(), 1u);
  }
  run_until_idle(*rt);
  EXPECT_EQ(rec.tokens[*id], solo_greedy(load_model(), prompt_of(30, 8), 3));
}

// P12: with three background sessions generating on the driver thread, an interactive
// request's first token comes within its own steps (two prompt chunks, one decode) plus the
// step in flight when it arrived: a bound in steps, and in time from the steps measured.
TEST_F(RuntimeReal, InteractiveFirstTokenWithinItsOwnStepsOnTheDriverThread) {
  struct Ran {
    double end_ms, step_ms;
    int decode_rows, prefill_tokens;
  };
  std::mutex mu;
  std::vector<Ran> ran;
  ScheduledRuntime* rtp = nullptr;
  RuntimeConfig cfg;
  cfg.on_step = [&](const StepOutcome& o) {
    std::lock_guard lk(mu);
    ran.push_back({rtp->now_ms(), o.step_ms, o.decode_rows, o.prefill_tokens});
  };
  auto rt = make_runtime(cfg);
  rtp = rt.get();
  Recorder rec;
  for (int i = 0; i < 3; ++i) {
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    ASSERT_TRUE(rt->submit(*key, request(prompt_of(60 + i, 12), 200, rec, RequestClass::background)).ok());
  }
  ASSERT_TRUE(rt->start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the background is decoding
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  double first_ms = -1;
  RuntimeRequest q = request(prompt_of(70, 30), 4, rec);  // 30 tokens: two 16-token chunks
  const RuntimeCallback record = q.on_event;
  q.on_event = [&](const RuntimeEvent& e) {
    if (e.kind == RuntimeEvent::Kind::token && e.index == 0) first_ms = rtp->now_ms();
    record(e);
  };
  const double submit_ms = rt->now_ms();
  auto id = rt->submit(*key, std::move(q));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(rt->wait_idle(60000));
  rt->stop();
  ASSERT_GT(first_ms, submit_ms);
  // The steps that ended after the submit, up to the one whose sampling gave the first token
  // (a token is sampled at the start of the step after its logits).
  std::vector<Ran> between;
  {
    std::lock_guard lk(mu);
    for (const Ran& r : ran)
      if (r.end_ms > submit_ms && r.end_ms - r.step_ms <= first_ms) between.push_back(r);
  }
  ASSERT_LE(between.size(), 4u) << "in flight + two prompt chunks + the first token's step";
  double longest = 0, sum = 0;
  for (const Ran& r : between) {
    longest = std::max(longest, r.step_ms);
    sum += r.step_ms;
  }
  EXPECT_LE(first_ms - submit_ms, 4 * longest + 20) << "the bound from the measured steps";
  EXPECT_LE(first_ms - submit_ms, sum + 20);
  EXPECT_EQ(rec.tokens[*id], solo_greedy(load_model(), prompt_of(70, 30), 4));
}

// P12: an interactive submit stops a step of background prompt chunks between layers; the
// chunks run again and every request still gives its solo greedy tokens.
TEST_F(RuntimeReal, InteractiveSubmitStopsABackgroundPromptStep) {
  int preempted = 0;
  for (int attempt = 0; attempt < 4 && preempted == 0; ++attempt) {
    auto rt = make_runtime();
    Recorder rec;
    std::vector<uint64_t> bg;
    for (int i = 0; i < 3; ++i) {
      auto key = rt->add_session(session_cfg());
      ASSERT_TRUE(key.ok());
      auto id = rt->submit(*key, request(prompt_of(80 + i, 200), 6, rec, RequestClass::background));
      ASSERT_TRUE(id.ok());
      bg.push_back(*id);
    }
    ASSERT_TRUE(rt->start().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // 600 prompt tokens to go
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    auto id = rt->submit(*key, request(prompt_of(90, 10), 4, rec));
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(rt->wait_idle(60000));
    rt->stop();
    preempted = rt->preempted_steps();
    EXPECT_EQ(rec.tokens[*id], solo_greedy(load_model(), prompt_of(90, 10), 4));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(rec.tokens[bg[size_t(i)]], solo_greedy(load_model(), prompt_of(80 + i, 200), 6)) << "session " << i;
      EXPECT_EQ(rec.ends[bg[size_t(i)]].reason, EndReason::done);
    }
  }
  EXPECT_GE(preempted, 1) << "no submit landed in a step of background prompt chunks in 4 tries";
}

// A step of background decode rows stops too: their tokens were streamed before the pass, so
// the next step feeds them again, and every request's tokens stay the solo ones.
TEST_F(RuntimeReal, InteractiveSubmitStopsABackgroundDecodeStep) {
  int preempted = 0;
  for (int attempt = 0; attempt < 4 && preempted == 0; ++attempt) {
    auto rt = make_runtime();
    Recorder rec;
    std::vector<uint64_t> bg;
    for (int i = 0; i < 3; ++i) {
      auto key = rt->add_session(session_cfg());
      ASSERT_TRUE(key.ok());
      auto id = rt->submit(*key, request(prompt_of(70 + i, 8), 60, rec, RequestClass::background));
      ASSERT_TRUE(id.ok());
      bg.push_back(*id);
    }
    ASSERT_TRUE(rt->start().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // prompts done: decode steps only
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    auto id = rt->submit(*key, request(prompt_of(91, 10), 4, rec));
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(rt->wait_idle(60000));
    rt->stop();
    preempted = rt->preempted_steps();
    EXPECT_EQ(rec.tokens[*id], solo_greedy(load_model(), prompt_of(91, 10), 4));
    for (int i = 0; i < 3; ++i) {
      const std::vector<int32_t> want = solo_greedy(load_model(), prompt_of(70 + i, 8), 60);
      EXPECT_EQ(rec.tokens[bg[size_t(i)]], want) << "session " << i;
      EXPECT_EQ(rec.ends[bg[size_t(i)]].n_generated, int(want.size())) << "a replayed token counted twice";
    }
  }
  EXPECT_GE(preempted, 1) << "no submit landed in a step of background decode rows in 4 tries";
}

// P12: the app's vsync and UI threads call frame() and report_ui_frame() (which change the
// engine's thread count mid-step) while the driver thread steps; the tokens stay the solo ones.
// Runs under TSan.
TEST_F(RuntimeReal, FrameCallsFromOtherThreadsWhileTheDriverSteps) {
  auto rt = make_runtime();
  Recorder rec;
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  auto id = rt->submit(*key, request(prompt_of(95, 20), 40, rec, RequestClass::background));
  ASSERT_TRUE(id.ok());
  std::atomic<bool> done{false};
  ASSERT_TRUE(rt->start().ok());
  std::thread vsync([&] {
    for (int f = 0; !done.load(); ++f) {
      const double start = rt->now_ms();
      EXPECT_TRUE(rt->frame(start, 8.0).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      EXPECT_TRUE(rt->report_ui_frame(start, f % 7 == 0 ? 9.0 : 2.0).ok());  // now and then a slow frame
      std::this_thread::sleep_for(std::chrono::milliseconds(6));
    }
  });
  EXPECT_TRUE(rt->wait_idle(60000));
  done = true;
  vsync.join();
  rt->stop();
  EXPECT_GE(rt->frame_stats().holds, 1) << "slow frames under every thread leave the UI a core";
  EXPECT_EQ(rec.tokens[*id], solo_greedy(load_model(), prompt_of(95, 20), 40));
}

TEST_F(RuntimeReal, ControlsEndWhatTheyShould) {
  auto rt = make_runtime();
  Recorder rec;
  auto a = rt->add_session(session_cfg());
  auto b = rt->add_session(session_cfg());
  ASSERT_TRUE(a.ok() && b.ok());
  auto ra = rt->submit(*a, request(prompt_of(40, 10), 50, rec));
  auto ra2 = rt->submit(*a, request(prompt_of(41, 5), 5, rec));
  auto rb = rt->submit(*b, request(prompt_of(42, 10), 6, rec));
  ASSERT_TRUE(ra.ok() && ra2.ok() && rb.ok());
  for (int s = 0; s < 4; ++s) ASSERT_TRUE(rt->step().ok());
  ASSERT_TRUE(rt->control(*a, ControlAction::interrupt).ok());  // ends ra only; ra2 runs
  run_until_idle(*rt);
  EXPECT_EQ(rec.ends[*ra].reason, EndReason::interrupted);
  EXPECT_LT(rec.ends[*ra].n_generated, 50);
  EXPECT_NE(rec.ends[*ra2].reason, EndReason::interrupted);
  EXPECT_EQ(rec.tokens[*rb], solo_greedy(load_model(), prompt_of(42, 10), 6));

  auto rc = rt->submit(*a, request(prompt_of(43, 30), 20, rec));
  ASSERT_TRUE(rc.ok());
  ASSERT_TRUE(rt->step().ok());
  ASSERT_TRUE(rt->control(*a, ControlAction::reset).ok());
  run_until_idle(*rt);
  EXPECT_EQ(rec.ends[*rc].reason, EndReason::reset);
  EXPECT_TRUE(rt->session(*a)->history().empty());
  // After a reset there is nothing to generate from: a prompt-less request fails cleanly.
  auto rd = rt->submit(*a, request({}, 3, rec));
  ASSERT_TRUE(rd.ok());
  run_until_idle(*rt);
  EXPECT_EQ(rec.ends[*rd].reason, EndReason::failed);
  EXPECT_EQ(rec.ends[*rd].status, Status::invalid_argument);
}

// A second request with the same 130-token prompt prefix restores 128 tokens (two blocks) from
// the shared prefix cache instead of computing them, and gets the same tokens.
TEST_F(RuntimeReal, PrefixCacheRestoresARepeatedPrompt) {
  PrefixCacheParams pp;
  pp.ram_bytes = 64 << 20;
  auto cache = PrefixCache::create(load_model()->identity(), pp);
  ASSERT_TRUE(cache.ok());
  RuntimeConfig cfg;
  cfg.prefix_cache = *cache;
  auto rt = make_runtime(cfg);
  Recorder rec;
  const auto prompt = prompt_of(80, 130);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    auto id = rt->submit(*key, request(prompt, 6, rec));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
    run_until_idle(*rt);
  }
  EXPECT_EQ(rec.ends[ids[0]].n_cached, 0);
  EXPECT_EQ(rec.ends[ids[1]].n_cached, 128);
  EXPECT_EQ(rec.tokens[ids[1]], rec.tokens[ids[0]]);
  EXPECT_EQ(rec.tokens[ids[0]], solo_greedy(load_model(), prompt, 6));
}

// Logprobs come from the raw distribution: the greedy token is the most likely one, its
// logprob is <= 0 and equals the first alternative's.
TEST_F(RuntimeReal, LogprobsOfGreedyTokens) {
  auto rt = make_runtime();
  std::vector<RuntimeEvent> events;
  std::mutex mu;
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  RuntimeRequest r;
  r.prompt = prompt_of(81, 10);
  r.max_tokens = 4;
  r.sampling = greedy();
  r.top_logprobs = 3;
  r.on_event = [&](const RuntimeEvent& e) {
    std::lock_guard lk(mu);
    if (e.kind == RuntimeEvent::Kind::token) events.push_back(e);
  };
  ASSERT_TRUE(rt->submit(*key, std::move(r)).ok());
  run_until_idle(*rt);
  ASSERT_FALSE(events.empty());
  for (const RuntimeEvent& e : events) {
    ASSERT_EQ(e.top.size(), 3u);
    EXPECT_EQ(e.top[0].first, e.token);
    EXPECT_FLOAT_EQ(e.top[0].second, e.logprob);
    EXPECT_LE(e.logprob, 0.0f);
    EXPECT_GE(e.top[0].second, e.top[1].second);
    EXPECT_GE(e.top[1].second, e.top[2].second);
  }
}

TEST_F(RuntimeReal, BadInputIsRefused) {
  auto rt = make_runtime();
  Recorder rec;
  EXPECT_FALSE(rt->submit(12345, request({1, 2}, 1, rec)).ok());
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  EXPECT_FALSE(rt->submit(*key, request({1, -3}, 1, rec)).ok());
  EXPECT_FALSE(rt->submit(*key, request({1, 1 << 30}, 1, rec)).ok());
  EXPECT_FALSE(rt->submit(*key, request({}, 0, rec)).ok());
  EXPECT_FALSE(rt->control(999, ControlAction::cancel).ok());
  SessionConfig small = session_cfg();
  small.n_batch = 8;  // cannot hold a 16-token chunk
  EXPECT_FALSE(rt->add_session(small).ok());
  SessionConfig int8 = session_cfg();
  int8.act = ActMode::int8;  // another activation mode cannot share a forward pass
  EXPECT_FALSE(rt->add_session(int8).ok());
  EXPECT_FALSE(rt->frame(0, -5.0).ok());
  EXPECT_FALSE(rt->frame(0, NAN).ok());
  EXPECT_FALSE(rt->report_ui_frame(0, -1).ok());
  EXPECT_FALSE(rt->report_ui_frame(0, INFINITY).ok());
  EXPECT_EQ(rt->pending(), 0u);
}

TEST_F(RuntimeReal, FrameModeWaitsForTheNextFrame) {
  double now = 0;
  RuntimeConfig cfg;
  cfg.clock_ms = [&now] { return now; };
  auto rt = make_runtime(cfg);
  Recorder rec;
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(rt->submit(*key, request(prompt_of(50, 4), 30, rec)).ok());
  ASSERT_TRUE(rt->frame(0, 16.0).ok());
  // The fake clock does not move: a frame allows at most max_tokens_per_frame (3) tokens.
  int decode = 0, kinds_wait = 0;
  for (int s = 0; s < 20; ++s) {
    auto r = rt->step();
    ASSERT_TRUE(r.ok());
    decode += r->decode_rows;
    kinds_wait += r->kind == StepOutcome::Kind::wait_frame;
  }
  EXPECT_LE(decode, 3);
  EXPECT_GT(kinds_wait, 0);
  now = 16;
  ASSERT_TRUE(rt->frame(16, 16.0).ok());
  auto r = rt->step();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, StepOutcome::Kind::ran);
}

TEST_F(RuntimeReal, FramePeriodMakesItsOwnFrames) {
  double now = 0;
  RuntimeConfig cfg;
  cfg.clock_ms = [&now] { return now; };
  auto rt = make_runtime(cfg);
  Recorder rec;
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  auto id = rt->submit(*key, request(prompt_of(51, 4), 12, rec));
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(rt->frame_period(-5.0).ok());
  ASSERT_TRUE(rt->frame_period(16.0).ok());
  // The clock stands still: one frame allows at most 3 decode tokens; each new frame 3 more.
  for (int frame = 0; frame < 3; ++frame) {
    int decode = 0;
    StepOutcome last;
    for (int s = 0; s < 10; ++s) {
      auto r = rt->step();
      ASSERT_TRUE(r.ok());
      decode += r->decode_rows;
      last = *r;
    }
    EXPECT_LE(decode, 3) << "frame " << frame;
    EXPECT_EQ(last.kind, StepOutcome::Kind::wait_frame);
    EXPECT_DOUBLE_EQ(last.resume_at_ms, (frame + 1) * 16.0) << "the next frame's start";
    now += 16.0;
  }
  ASSERT_TRUE(rt->frame_period(0).ok());  // flat out: the rest of the reply at once
  run_until_idle(*rt);
  EXPECT_EQ(rec.tokens[*id], solo_greedy(load_model(), prompt_of(51, 4), 12));
}

TEST_F(RuntimeReal, GovernorCapsRowsAndRate) {
  auto script = ScriptedThermalSource::create({{0, kThermalSevere, kUnknownThermal}});
  ASSERT_TRUE(script.ok());
  RuntimeConfig cfg;
  cfg.thermal = &*script;
  cfg.governor = GovernorConfig{};
  auto rt = make_runtime(cfg);
  Recorder rec;
  for (int i = 0; i < 4; ++i) {
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    ASSERT_TRUE(rt->submit(*key, request(prompt_of(60 + i, 4), 4, rec)).ok());
  }
  int throttled = 0, ran = 0;
  for (int s = 0; s < 400 && rt->pending() > 0; ++s) {
    auto r = rt->step();
    ASSERT_TRUE(r.ok());
    if (r->kind == StepOutcome::Kind::throttled) {
      ++throttled;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (r->kind != StepOutcome::Kind::ran) continue;
    ++ran;
    if (ran > 1) {  // the first step ran before the first tick
      EXPECT_LE(r->decode_rows, 2) << "severe: batch 2";
    }
  }
  EXPECT_EQ(rt->caps().level, 3);
  EXPECT_GT(throttled, 0) << "severe caps decode at 3 steps/s";
}

TEST_F(RuntimeReal, DriverThreadServesOtherThreads) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt->start().ok());
  Recorder rec;
  std::vector<std::thread> apps;
  std::vector<uint64_t> ids(4);
  for (int i = 0; i < 4; ++i)
    apps.emplace_back([&, i] {
      auto key = rt->add_session(session_cfg());
      ASSERT_TRUE(key.ok());
      auto id = rt->submit(*key, request(prompt_of(70 + i, 6 + i), 5, rec));
      ASSERT_TRUE(id.ok());
      ids[size_t(i)] = *id;
    });
  for (auto& t : apps) t.join();
  EXPECT_TRUE(rt->wait_idle(120000));
  rt->stop();
  EXPECT_FALSE(rt->driver_error().has_value());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rec.tokens[ids[size_t(i)]], solo_greedy(load_model(), prompt_of(70 + i, 6 + i), 5));
}

}  // namespace
}  // namespace pllm
