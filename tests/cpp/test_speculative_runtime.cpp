// Speculative decoding in the scheduled runtime (runtime/scheduled_runtime_draft.cpp) on the
// real SmolLM2 file: requests that draft (prompt lookup, layer skipping, a draft model), side
// by side in one runtime with requests that do not, stream the tokens the same requests give
// without drafting, greedy and seeded, with a grammar, at their exact max_tokens, and when an
// interactive submit stops a step of background verify rows. This binary also runs under TSan.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "constrained/grammar_source.h"
#include "runtime/scheduled_runtime.h"
#include "speculative_fixture.h"

namespace pllm {
namespace {
using namespace spec_test;

SessionConfig session_cfg(KvType kv = KvType::f16) {
  SessionConfig c;
  c.n_ctx = 512;
  c.n_batch = 16;
  c.kv.type = kv;
  return c;
}

struct Recorder {
  std::mutex mu;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, RuntimeEvent> ends;
  RuntimeCallback callback() {
    return [this](const RuntimeEvent& e) {
      std::lock_guard lk(mu);
      if (e.kind == RuntimeEvent::Kind::token) {
        EXPECT_EQ(e.index, int(tokens[e.request].size())) << "token events in order, none twice";
        tokens[e.request].push_back(e.token);
      } else {
        ends[e.request] = e;
      }
    };
  }
};

std::unique_ptr<ScheduledRuntime> make_runtime(const Fixture& fx) {
  auto engine = Engine::create(2);
  EXPECT_TRUE(engine.ok());
  RuntimeConfig cfg;
  cfg.scheduler.prefill_chunk = 16;
  auto rt = ScheduledRuntime::create(fx.target, *engine, std::move(cfg));
  EXPECT_TRUE(rt.ok()) << (rt.ok() ? "" : rt.error().message);
  return rt.ok() ? std::move(rt).value() : nullptr;
}

void run_until_idle(ScheduledRuntime& rt) {
  for (int i = 0; i < 20000 && rt.pending() > 0; ++i) {
    auto r = rt.step();
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  ASSERT_EQ(rt.pending(), 0u);
}

DraftSpec spec_of(DraftKind kind, const Fixture& fx, int max_tokens = 6) {
  DraftSpec d;
  d.kind = kind;
  d.max_tokens = max_tokens;
  if (kind == DraftKind::model) d.model = fx.draft;
  if (kind == DraftKind::skip) d.skip_layers = fx.skip;
  return d;
}

// A text that repeats: prompt lookup's guesses are often right, and sometimes not.
const char* kRewrite =
    "Copy this list exactly: red apple, green pear, red apple, green pear, red apple, green pear, "
    "yellow banana, red apple, green pear.";

struct Job {
  std::vector<int32_t> prompt;
  KvType kv = KvType::f16;
  DraftKind kind = DraftKind::none;
  RequestClass klass = RequestClass::interactive;
};

// Runs every job twice in one runtime (each on its own session): once drafting as asked, once
// plain; returns the plain and the drafted tokens and end events.
struct Pair {
  std::vector<int32_t> plain, drafted;
  RuntimeEvent plain_end, drafted_end;
};
std::vector<Pair> run_pairs(const Fixture& fx, const std::vector<Job>& jobs, int max_tokens, const SamplingConfig& sc,
                            const GrammarConstraint& grammar = {}) {
  auto rt = make_runtime(fx);
  Recorder rec;
  std::vector<std::pair<uint64_t, uint64_t>> ids;
  for (const Job& j : jobs) {
    uint64_t got[2] = {0, 0};
    for (int drafted = 0; drafted < 2; ++drafted) {
      auto key = rt->add_session(session_cfg(j.kv));
      EXPECT_TRUE(key.ok());
      RuntimeRequest r;
      r.klass = j.klass;
      r.prompt = j.prompt;
      r.max_tokens = max_tokens;
      r.sampling = sc;
      r.grammar = grammar;
      if (drafted) r.draft = spec_of(j.kind, fx);
      r.on_event = rec.callback();
      auto id = rt->submit(*key, std::move(r));
      EXPECT_TRUE(id.ok()) << id.error().message;
      got[drafted] = id.ok() ? *id : 0;
    }
    ids.emplace_back(got[0], got[1]);
  }
  run_until_idle(*rt);
  std::vector<Pair> out;
  for (auto [p, d] : ids) out.push_back({rec.tokens[p], rec.tokens[d], rec.ends[p], rec.ends[d]});
  return out;
}

class SpecRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    fx_ = fixture("smollm2");
    if (!fx_) GTEST_SKIP() << "SmolLM2 not found at " << real_model_path();
  }
  const Fixture* fx_ = nullptr;
};

SamplingConfig greedy() {
  SamplingConfig s;
  s.temperature = 0;
  return s;
}

TEST_F(SpecRuntime, DraftingRequestsStreamThePlainTokens) {
  const Model& m = *fx_->target;
  std::vector<Job> jobs = {
      {encode(m, kRewrite), KvType::f16, DraftKind::lookup},
      {encode(m, kPrompts[0]), KvType::q8, DraftKind::skip},
      {encode(m, kPrompts[1]), KvType::q4, DraftKind::model, RequestClass::background},
      {encode(m, kRewrite), KvType::f32, DraftKind::lookup, RequestClass::background},
  };
  const auto pairs = run_pairs(*fx_, jobs, 40, greedy());
  DraftStats all;
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_FALSE(pairs[i].plain.empty()) << "job " << i << " reason " << int(pairs[i].plain_end.reason) << " status " << int(pairs[i].plain_end.status);
    EXPECT_EQ(pairs[i].drafted, pairs[i].plain) << "job " << i << " (" << draft_kind_name(jobs[i].kind) << ")";
    EXPECT_EQ(pairs[i].drafted_end.n_generated, int(pairs[i].plain.size()));
    EXPECT_EQ(pairs[i].drafted_end.reason, pairs[i].plain_end.reason);
    EXPECT_EQ(pairs[i].plain_end.draft.drafted, 0);
    all.drafted += pairs[i].drafted_end.draft.drafted;
    all.accepted += pairs[i].drafted_end.draft.accepted;
  }
  // Both paths of a verify row ran: guesses kept and guesses missed.
  EXPECT_GT(all.accepted, 0);
  EXPECT_GT(all.drafted, all.accepted);
}

TEST_F(SpecRuntime, SeededSamplingDrawsThePlainTokens) {
  SamplingConfig sc;
  sc.temperature = 0.9f;
  sc.top_k = 40;
  sc.top_p = 0.95f;
  sc.repeat_penalty = 1.1f;
  sc.repeat_last_n = 64;
  const Model& m = *fx_->target;
  for (uint64_t seed : {3u, 11u}) {
    sc.seed = seed;
    const auto pairs = run_pairs(*fx_, {{encode(m, kRewrite), KvType::f16, DraftKind::lookup},
                                        {encode(m, kPrompts[2]), KvType::f16, DraftKind::skip}},
                                 32, sc);
    for (const Pair& p : pairs) EXPECT_EQ(p.drafted, p.plain) << "seed " << seed;
  }
}

TEST_F(SpecRuntime, GrammarConstrainedDraftsAreThePlainTokens) {
  auto g = compile_grammar(GrammarKind::json, "");
  ASSERT_TRUE(g.ok()) << g.error().message;
  LazyTokenVocab vocab;
  const GrammarConstraint grammar{*g, vocab.get(fx_->target->tokenizer())};
  const auto pairs = run_pairs(*fx_, {{encode(*fx_->target, "Give me a JSON object describing a cat."), KvType::f16,
                                       DraftKind::lookup}},
                               48, greedy(), grammar);
  EXPECT_FALSE(pairs[0].plain.empty());
  EXPECT_EQ(pairs[0].drafted, pairs[0].plain);
}

// Each kept guess and each miss streams a token: a request still ends at its max_tokens.
TEST_F(SpecRuntime, MaxTokensIsExact) {
  const Model& m = *fx_->target;
  for (int max_tokens : {1, 2, 3, 7, 13}) {
    const auto pairs = run_pairs(*fx_, {{encode(m, kRewrite), KvType::f16, DraftKind::lookup}}, max_tokens, greedy());
    EXPECT_EQ(pairs[0].drafted, pairs[0].plain) << max_tokens;
    EXPECT_LE(int(pairs[0].drafted.size()), max_tokens);
    EXPECT_EQ(pairs[0].drafted_end.n_generated, int(pairs[0].drafted.size()));
  }
}

TEST_F(SpecRuntime, BadDraftsAreRefusedAtSubmit) {
  auto rt = make_runtime(*fx_);
  auto key = rt->add_session(session_cfg());
  ASSERT_TRUE(key.ok());
  RuntimeRequest r;
  r.prompt = encode(*fx_->target, kRewrite);
  r.max_tokens = 4;
  r.draft = spec_of(DraftKind::skip, *fx_);
  r.draft.skip_layers = {99};
  auto bad = rt->submit(*key, r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Status::invalid_argument);
  r.draft = spec_of(DraftKind::lookup, *fx_, 0);
  EXPECT_FALSE(rt->submit(*key, r).ok());
  EXPECT_EQ(rt->pending(), 0u) << "a refused request leaves nothing queued";
}

// Background verify rows stopped between layers by an interactive submit feed their drawn
// token again, without guesses; nothing streamed twice, the output unchanged.
TEST_F(SpecRuntime, InteractiveSubmitStopsABackgroundVerifyStep) {
  const Model& m = *fx_->target;
  int preempted = 0;
  for (int attempt = 0; attempt < 4 && preempted == 0; ++attempt) {
    auto rt = make_runtime(*fx_);
    Recorder rec;
    std::vector<uint64_t> bg;
    const std::vector<int32_t> prompt = encode(m, kRewrite);
    for (DraftKind kind : {DraftKind::lookup, DraftKind::skip}) {
      auto key = rt->add_session(session_cfg());
      ASSERT_TRUE(key.ok());
      RuntimeRequest r;
      r.klass = RequestClass::background;
      r.prompt = prompt;
      r.max_tokens = 48;
      r.sampling = greedy();
      r.draft = spec_of(kind, *fx_);
      r.on_event = rec.callback();
      auto id = rt->submit(*key, std::move(r));
      ASSERT_TRUE(id.ok());
      bg.push_back(*id);
    }
    ASSERT_TRUE(rt->start().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the prompts are done: verify steps
    auto key = rt->add_session(session_cfg());
    ASSERT_TRUE(key.ok());
    RuntimeRequest r;
    r.prompt = encode(m, kPrompts[2]);
    r.max_tokens = 4;
    r.sampling = greedy();
    r.on_event = rec.callback();
    ASSERT_TRUE(rt->submit(*key, std::move(r)).ok());
    ASSERT_TRUE(rt->wait_idle(120000));
    rt->stop();
    preempted = rt->preempted_steps();
    // The plain reference: the same prompt without drafting, alone.
    const auto pairs = run_pairs(*fx_, {{prompt, KvType::f16, DraftKind::lookup}}, 48, greedy());
    for (uint64_t id : bg) {
      EXPECT_EQ(rec.tokens[id], pairs[0].plain);
      EXPECT_EQ(rec.ends[id].n_generated, int(pairs[0].plain.size()));
    }
  }
  EXPECT_GE(preempted, 1) << "no submit landed in a step of background verify rows in 4 tries";
}

}  // namespace
}  // namespace pllm
