// The engine and batched steps (runtime/engine.h, Session::step) with the real SmolLM2 file
// (skipped if absent): sequences of different lengths, KV types and windows stepped together
// give each sequence the greedy tokens of its solo run and the same logits up to summation
// order; cancelling one session mid-step leaves it as it was and the others advanced; sessions
// driven from several threads on one engine are safe (this binary also runs under TSan).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "model/model.h"
#include "real_model.h"
#include "runtime/prefix_reuse.h"
#include "runtime/session.h"

namespace pllm {
namespace {

struct SeqSpec {
  int prompt_len;
  KvOptions kv;
};

// Eight different sequences: lengths that need several chunks of n_batch and lengths that
// start decoding while others still prefill; every KV type, with and without a window.
const SeqSpec kSpecs[] = {
    {5, {KvType::f16, 0, 4}},  {37, {KvType::q8, 0, 4}},  {12, {KvType::f32, 0, 4}}, {50, {KvType::q4, 0, 4}},
    {23, {KvType::f16, 24, 4}}, {3, {KvType::q8, 0, 4}}, {41, {KvType::q8, 32, 4}}, {18, {KvType::f16, 0, 4}},
};
constexpr int kBatch = 16;   // prefill chunk (n_batch) of every session
constexpr int kDecode = 6;   // greedy tokens after each prompt

std::shared_ptr<const Model> load_model() { return shared_real_model(); }

std::vector<int32_t> prompt_of(int seq, int len) { return synthetic_prompt(seq, len); }

SessionConfig config_of(const SeqSpec& s) {
  SessionConfig cfg;
  cfg.n_ctx = 128;
  cfg.n_threads = 2;
  cfg.n_batch = kBatch;
  cfg.kv = s.kv;
  return cfg;
}

int32_t argmax(const float* l, int n) { return int32_t(std::max_element(l, l + n) - l); }

// Sequence `seq` (kSpecs) on a session of engine `e`: a 9-token prompt, then 4 greedy tokens
// into `out`, one step each.
void greedy_on(const std::shared_ptr<const Model>& model, int seq, std::shared_ptr<Engine> e,
               std::vector<int32_t>& out) {
  auto s = Session::create(model, config_of(kSpecs[seq]), std::move(e));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.value()->eval_last(prompt_of(seq, 9)).ok());
  const int V = model->config().n_vocab;
  for (int i = 0; i < 4; ++i) {
    out.push_back(argmax(s.value()->last_logits(), V));
    ASSERT_TRUE(s.value()->eval_last({&out.back(), 1}).ok());
  }
}

// What one sequence produced: the greedy tokens and the logits each was chosen from.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

// The sequence alone: its prompt in chunks of kBatch, then kDecode greedy steps (chunk 1:
// every prompt token through the one-row path instead).
Trace solo_run(int seq, const SeqSpec& spec, int chunk = kBatch) {
  auto model = load_model();
  auto s = Session::create(model, config_of(spec));
  EXPECT_TRUE(s.ok());
  Session& session = *s.value();
  const int V = model->config().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(seq, spec.prompt_len);
  for (size_t at = 0; at < prompt.size(); at += size_t(chunk)) {
    const size_t n = std::min(size_t(chunk), prompt.size() - at);
    EXPECT_TRUE(session.eval_last({prompt.data() + at, n}).ok());
  }
  Trace t;
  for (int i = 0; i < kDecode; ++i) {
    const float* l = session.last_logits();
    t.logits.emplace_back(l, l + V);
    t.tokens.push_back(argmax(l, V));
    if (i + 1 < kDecode) {
      EXPECT_TRUE(session.eval_last({&t.tokens.back(), 1}).ok());
    }
  }
  return t;
}

// All n sequences on one engine: each step takes the next prompt chunk of those still in
// prefill and one decode row of the others, so chunks and decode rows share steps.
std::vector<Trace> batched_run(int n) {
  auto model = load_model();
  auto engine = Engine::create(2);
  EXPECT_TRUE(engine.ok());
  const int V = model->config().n_vocab;
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    auto s = Session::create(model, config_of(kSpecs[i]), engine.value());
    EXPECT_TRUE(s.ok());
    sessions.push_back(std::move(s).value());
    prompts.push_back(prompt_of(i, kSpecs[i].prompt_len));
  }
  std::vector<Trace> out(static_cast<size_t>(n));
  std::vector<size_t> fed(static_cast<size_t>(n), 0);
  std::vector<SessionStep> steps;
  for (;;) {
    steps.clear();
    for (int i = 0; i < n; ++i) {
      Trace& t = out[size_t(i)];
      if (fed[size_t(i)] < prompts[size_t(i)].size()) {
        const size_t k = std::min(size_t(kBatch), prompts[size_t(i)].size() - fed[size_t(i)]);
        steps.push_back({sessions[size_t(i)].get(), {prompts[size_t(i)].data() + fed[size_t(i)], k}, true, nullptr, {}});
        fed[size_t(i)] += k;
      } else if (int(t.tokens.size()) < kDecode) {
        steps.push_back({sessions[size_t(i)].get(), {&t.tokens.back(), 1}, true, nullptr, {}});
      }
    }
    if (steps.empty()) break;
    EXPECT_TRUE(Session::step(steps).ok());
    for (const SessionStep& st : steps) {
      EXPECT_TRUE(st.result.ok()) << st.result.error().message;
      const int i = int(std::find_if(sessions.begin(), sessions.end(), [&](auto& p) { return p.get() == st.session; }) -
                        sessions.begin());
      if (fed[size_t(i)] < prompts[size_t(i)].size()) continue;  // mid-prompt: no token yet
      const float* l = st.session->last_logits();
      out[size_t(i)].logits.emplace_back(l, l + V);
      out[size_t(i)].tokens.push_back(argmax(l, V));
    }
  }
  return out;
}

// max |a - b| over the logits of every decode step, relative to the RMS of a's logits.
double max_rel(const Trace& a, const Trace& b) {
  double worst = 0;
  for (size_t s = 0; s < a.logits.size() && s < b.logits.size(); ++s) {
    double ss = 0, d = 0;
    for (size_t v = 0; v < a.logits[s].size(); ++v) {
      ss += double(a.logits[s][v]) * a.logits[s][v];
      d = std::max(d, std::fabs(double(a.logits[s][v]) - b.logits[s][v]));
    }
    worst = std::max(worst, d / std::sqrt(ss / double(a.logits[s].size())));
  }
  return worst;
}

class EngineReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
    ASSERT_NE(load_model(), nullptr);
  }
};

// Batched and solo runs differ only in the order of f32 sums: a matmul over several rows
// decodes each weight block once for up to 8 rows (vec_dot_f32_multi) where one row uses the
// multi-row-of-weights kernel, and a decode step's attention is split differently with more
// rows. The engine already computes one sequence in two such orders: its prompt in chunks
// (multi-row kernels) or token by token (one-row kernels). That difference is the measured
// scale of summation-order noise for this model and this sequence's KV type (int8/4-bit keys
// amplify it: a last-bit change can move a code by one step); batching may not exceed 4x of
// it (plus 1e-5 of the RMS, for sequences whose two solo orders happen to agree closely).
// Mixing up rows, positions or caches moves logits by far more (order 1: a different context).
TEST_F(EngineReal, BatchedEqualsSoloForOneToEightSequences) {
  std::vector<Trace> solo;
  std::vector<double> bound;
  for (int i = 0; i < 8; ++i) {
    solo.push_back(solo_run(i, kSpecs[i]));
    const double noise = max_rel(solo.back(), solo_run(i, kSpecs[i], 1));
    bound.push_back(4 * noise + 1e-5);
    std::printf("sequence %d (kv %s, window %d): order noise %.3g -> bound %.3g\n", i, kv_type_name(kSpecs[i].kv.type),
                kSpecs[i].kv.window, noise, bound.back());
  }
  for (int n : {1, 2, 3, 5, 8}) {
    const std::vector<Trace> got = batched_run(n);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[size_t(i)].tokens, solo[size_t(i)].tokens) << "sequence " << i << " of " << n;
      const double rel = max_rel(solo[size_t(i)], got[size_t(i)]);
      EXPECT_LE(rel, bound[size_t(i)]) << "sequence " << i << " of " << n;
      if (n == 8) std::printf("N=8 sequence %d: max_rel %.3g\n", i, rel);
    }
  }
}

// A session cancelled while the step runs reports cancelled and is as before the step; the
// others advance, and the cancelled one continues afterwards as if the step never happened.
TEST_F(EngineReal, CancelMidStepLeavesThatSessionUnchanged) {
  auto model = load_model();
  auto engine = Engine::create(2);
  ASSERT_TRUE(engine.ok());
  SessionConfig cfg = config_of(kSpecs[0]);
  cfg.n_batch = 64;
  std::vector<std::unique_ptr<Session>> s;
  for (int i = 0; i < 6; ++i) s.push_back(Session::create(model, cfg, engine.value()).value());
  const std::vector<int32_t> head = prompt_of(0, 4), big = prompt_of(1, 64);
  for (auto& x : s) ASSERT_TRUE(x->eval_last(head).ok());
  std::vector<SessionStep> steps;
  for (auto& x : s) steps.push_back({x.get(), big, true, nullptr, {}});
  // A 6 x 64-row step takes far longer than the delay (seconds on two cores).
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s[2]->request_cancel();
  });
  ASSERT_TRUE(Session::step(steps).ok());
  canceller.join();
  s[2]->clear_cancel();
  ASSERT_FALSE(steps[2].result.ok());
  EXPECT_EQ(steps[2].result.error().code, Status::cancelled);
  EXPECT_EQ(s[2]->history().size(), head.size());
  EXPECT_EQ(s[2]->kv_cache().end(), int(head.size()));
  for (int i : {0, 1, 3, 4, 5}) {
    EXPECT_TRUE(steps[size_t(i)].result.ok());
    EXPECT_EQ(s[size_t(i)]->history().size(), head.size() + big.size());
  }
  // Continuing the cancelled session gives what the others got.
  ASSERT_TRUE(s[2]->eval_last(big).ok());
  const int V = model->config().n_vocab;
  EXPECT_EQ(argmax(s[2]->last_logits(), V), argmax(s[0]->last_logits(), V));
}

// Bad steps: one error for the step, or one per session, never a crash or a silent move.
TEST_F(EngineReal, StepErrors) {
  auto model = load_model();
  auto e1 = Engine::create(1), e2 = Engine::create(1);
  ASSERT_TRUE(e1.ok() && e2.ok());
  SessionConfig cfg = config_of(kSpecs[0]);
  cfg.n_ctx = 8;
  cfg.n_batch = 4;
  auto a = Session::create(model, cfg, e1.value()).value();
  auto b = Session::create(model, cfg, e2.value()).value();
  auto c = Session::create(model, cfg, e1.value()).value();
  const int32_t t[] = {1, 2, 3, 4, 5, 6, 7};
  std::vector<SessionStep> other_engine = {{a.get(), {t, 1}, true, nullptr, {}}, {b.get(), {t, 1}, true, nullptr, {}}};
  EXPECT_FALSE(Session::step(other_engine).ok());
  std::vector<SessionStep> twice = {{a.get(), {t, 1}, true, nullptr, {}}, {a.get(), {t, 1}, true, nullptr, {}}};
  EXPECT_FALSE(Session::step(twice).ok());
  EXPECT_TRUE(a->history().empty());
  // Too many tokens for c's batch: c's own error, a still advances.
  std::vector<SessionStep> mixed = {{a.get(), {t, 2}, true, nullptr, {}}, {c.get(), {t, 5}, true, nullptr, {}}};
  EXPECT_TRUE(Session::step(mixed).ok());
  EXPECT_TRUE(mixed[0].result.ok());
  EXPECT_EQ(mixed[1].result.error().code, Status::invalid_argument);
  EXPECT_EQ(a->history().size(), 2u);
  EXPECT_TRUE(c->history().empty());
  // Context full for a (8 positions): its error; c advances.
  ASSERT_TRUE(a->eval_last({t, 4}).ok());
  std::vector<SessionStep> full = {{a.get(), {t, 3}, true, nullptr, {}}, {c.get(), {t, 3}, true, nullptr, {}}};
  EXPECT_TRUE(Session::step(full).ok());
  EXPECT_EQ(full[0].result.error().code, Status::out_of_range);
  EXPECT_EQ(a->history().size(), 6u);
  EXPECT_EQ(c->history().size(), 3u);
  // An out-of-range token fails the step as a whole and moves nobody.
  const int32_t bad[] = {1 << 30};
  std::vector<SessionStep> bad_tok = {{c.get(), {t, 1}, true, nullptr, {}}, {a.get(), {bad, 1}, true, nullptr, {}}};
  EXPECT_FALSE(Session::step(bad_tok).ok());
  EXPECT_EQ(c->history().size(), 3u);
  EXPECT_EQ(a->history().size(), 6u);
}

// Sessions of one engine used from several threads at once (each session by one thread):
// steps take turns and every thread gets what it gets alone.
TEST_F(EngineReal, ConcurrentCallersOnOneEngine) {
  auto model = load_model();
  auto engine = Engine::create(2);
  ASSERT_TRUE(engine.ok());
  auto run = [&](int seq, std::shared_ptr<Engine> e, std::vector<int32_t>& out) {
    greedy_on(model, seq, std::move(e), out);
  };
  std::vector<int32_t> alone[3], together[3];
  for (int i = 0; i < 3; ++i) run(i, engine.value(), alone[i]);
  std::vector<std::thread> th;
  for (int i = 0; i < 3; ++i) th.emplace_back([&, i] { run(i, engine.value(), together[i]); });
  // Meanwhile a pre-warm runs on the engine's background lane.
  auto pw = Session::create(model, config_of(kSpecs[0]), engine.value()).value();
  prewarm(*pw, prompt_of(7, 40));
  for (auto& t : th) t.join();
  EXPECT_TRUE(pw->wait_background().ok());
  EXPECT_EQ(pw->history().size(), 40u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(alone[i], together[i]) << "thread " << i;
}

// An engine that may use a device (auto) but finds none: concurrent callers take turns on the
// CPU as before while another thread reads where the steps ran; sessions freed meanwhile drop
// their (absent) device copies under the lane lock. The loader is pointed at nothing so that no
// driver (uninstrumented under TSan) is loaded.
TEST_F(EngineReal, ConcurrentCallersOnAnAutoEngineWithoutADevice) {
  ASSERT_EQ(setenv("PLLM_VK_LOADER", "/nonexistent/libvulkan.so.1", 1), 0);
  auto model = load_model();
  auto engine = Engine::create(2, EngineBackend::auto_);
  ASSERT_TRUE(engine.ok());
  auto run = [&](int seq, std::shared_ptr<Engine> e, std::vector<int32_t>& out) {
    greedy_on(model, seq, std::move(e), out);
  };
  auto cpu = Engine::create(2);
  ASSERT_TRUE(cpu.ok());
  std::vector<int32_t> alone[3], together[3];
  for (int i = 0; i < 3; ++i) run(i, cpu.value(), alone[i]);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) (void)engine.value()->backend_stats();
  });
  std::vector<std::thread> th;
  for (int i = 0; i < 3; ++i) th.emplace_back([&, i] { run(i, engine.value(), together[i]); });
  for (auto& t : th) t.join();
  done.store(true);
  reader.join();
  unsetenv("PLLM_VK_LOADER");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(alone[i], together[i]) << "thread " << i;
  const BackendStats st = engine.value()->backend_stats();
  EXPECT_EQ(st.device_steps, 0);
  EXPECT_GE(st.cpu_steps, 15);  // 3 sessions x (the prompt + 4 tokens)
  EXPECT_EQ(st.fallbacks, 0);
  EXPECT_NE(st.device_error.find("loader"), std::string::npos) << st.device_error;
}

}  // namespace
}  // namespace pllm
