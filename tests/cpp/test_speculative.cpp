// Speculative decoding (runtime/speculative.h, runtime/decode_steps.h) against plain decoding on
// the real models:
//  * Identity: greedy output equals plain decoding's token for token, for every drafter (prompt
//    lookup, a draft model = the target cut to its first layers, layer skipping) and every KV
//    type (f32, f16, q8, q4, window + sinks), in int16 and exact activations, across two turns
//    on one session; seeded sampling draws plain sampling's tokens.
//  * Rollback at every position: a scripted drafter whose first j guesses are right and the
//    rest wrong, for every j, with a fixed length.
//  * The distribution (chi-square): speculative and plain sampling over many seeds.
//  * Cancel inside a verify pass; a grammar; the errors of bad drafters.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "constrained/grammar_source.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "real_model.h"
#include "speculative_fixture.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime/speculative.h"

namespace pllm {
namespace {
using namespace spec_test;

std::unique_ptr<Session> session(const Fixture& fx, KvOptions kv, ActMode act = kDefaultActMode) {
  SessionConfig cfg;
  cfg.n_ctx = 1024;
  cfg.n_threads = 2;
  cfg.kv = kv;
  cfg.act = act;
  auto s = Session::create(fx.target, cfg);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(*s) : nullptr;
}

struct Gen {
  std::vector<int32_t> tokens;
  GenerateStats stats;
};

Gen gen(Session& s, const std::vector<int32_t>& prompt, GenerateParams gp) {
  Gen r;
  auto st = generate(s, prompt, gp, [&](int32_t t, std::string_view) {
    if (t >= 0) r.tokens.push_back(t);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.error().message;
  if (st.ok()) r.stats = *st;
  return r;
}

struct IdentityCase {
  std::string model;
  KvOptions kv;
  ActMode act;
};

class SpeculativeIdentity : public ::testing::TestWithParam<IdentityCase> {};

// Two turns per prompt on one session (the second reuses the first's cache, guesses and all),
// for each drafter: the tokens and the end reasons are plain decoding's. Plain decoding runs
// once per prompt; each drafter's session then replays the same turns.
TEST_P(SpeculativeIdentity, GreedyIsPlainDecoding) {
  const IdentityCase& c = GetParam();
  const Fixture* fx = fixture(c.model);
  if (!fx) GTEST_SKIP() << c.model << " not found ($POCKETLLM_MODELS or models/)";
  GenerateParams gp;
  gp.max_tokens = 40;
  gp.stop_strings = {"\n\n\n"};
  struct Turn {
    std::vector<int32_t> prompt;
    Gen plain;
  };
  std::vector<std::vector<Turn>> runs;  // per prompt, its two turns as plain decoding ran them
  for (const char* text : kPrompts) {
    auto plain_s = session(*fx, c.kv, c.act);
    ASSERT_TRUE(plain_s);
    std::vector<int32_t> prompt = encode(*fx->target, text);
    std::vector<Turn>& turns = runs.emplace_back();
    for (int turn = 0; turn < 2; ++turn) {
      turns.push_back({prompt, gen(*plain_s, prompt, gp)});
      const std::vector<int32_t>& out = turns.back().plain.tokens;
      prompt.insert(prompt.end(), out.begin(), out.end());
      for (int32_t t : encode(*fx->target, " Say it again."))
        if (t != fx->target->tokenizer().bos()) prompt.push_back(t);
    }
  }
  for (DraftKind kind : {DraftKind::lookup, DraftKind::model, DraftKind::skip}) {
    int drafted = 0, kept = 0;
    for (size_t p = 0; p < runs.size(); ++p) {
      auto spec_s = session(*fx, c.kv, c.act);
      ASSERT_TRUE(spec_s);
      auto d = drafter(kind, *fx, *spec_s);
      ASSERT_TRUE(d);
      GenerateParams sp = gp;
      sp.drafter = d.get();
      sp.draft_min = sp.draft_max = 4;  // a verify pass every step, whatever the guesses are worth
      for (size_t turn = 0; turn < runs[p].size(); ++turn) {
        const Turn& t = runs[p][turn];
        const Gen b = gen(*spec_s, t.prompt, sp);
        ASSERT_EQ(t.plain.tokens, b.tokens) << draft_kind_name(kind) << " turn " << turn << ": " << kPrompts[p];
        EXPECT_EQ(t.plain.stats.reason, b.stats.reason);
        EXPECT_EQ(b.stats.n_drafted >= b.stats.n_draft_accepted, true);
        drafted += b.stats.n_drafted;
        kept += b.stats.n_draft_accepted;
      }
    }
    // Each drafter made guesses and both kept and rejected some (else the test checks nothing).
    EXPECT_GT(drafted, 0) << draft_kind_name(kind);
    EXPECT_GT(kept, 0) << draft_kind_name(kind);
    EXPECT_LT(kept, drafted) << draft_kind_name(kind);
  }
}

KvOptions kv(KvType t, int window = 0, int sinks = 4) { return KvOptions{t, window, sinks}; }

INSTANTIATE_TEST_SUITE_P(
    Cases, SpeculativeIdentity,
    ::testing::Values(IdentityCase{"smollm2", kv(KvType::f16), ActMode::int16},
                      IdentityCase{"smollm2", kv(KvType::f32), ActMode::int16},
                      IdentityCase{"smollm2", kv(KvType::q8), ActMode::int16},
                      IdentityCase{"smollm2", kv(KvType::q4), ActMode::int16},
                      IdentityCase{"smollm2", kv(KvType::f16, 48, 4), ActMode::int16},
                      IdentityCase{"smollm2", kv(KvType::q4, 64, 4), ActMode::int16},
                      IdentityCase{"gemma3", kv(KvType::f16), ActMode::int16},
                      IdentityCase{"gemma3", kv(KvType::q8), ActMode::int16}),
    [](const auto& info) {
      const IdentityCase& c = info.param;
      return c.model + "_" + kv_type_name(c.kv.type) + (c.kv.window ? "_window" + std::to_string(c.kv.window) : "") +
             "_" + (c.act == ActMode::exact ? "exact" : "int16");
    });

// Guesses the reference continuation for its first `right` tokens, then wrong ones.
class ScriptedDrafter final : public Drafter {
 public:
  ScriptedDrafter(std::vector<int32_t> ref, int right, int n_vocab) : ref_(std::move(ref)), right_(right), n_vocab_(n_vocab) {}
  DraftKind kind() const override { return DraftKind::lookup; }
  Result<void> draft(Session&, std::span<const int32_t> t, int max_n, std::vector<int32_t>& out) override {
    for (int i = 0; i < max_n; ++i) {
      const size_t at = t.size() + size_t(i);
      const int32_t truth = at < ref_.size() ? ref_[at] : 0;
      out.push_back(i < right_ ? truth : (truth + 1 + i) % n_vocab_);
    }
    return {};
  }

 private:
  std::vector<int32_t> ref_;
  int right_, n_vocab_;
};

// Rejections at every position of a draft of 8, in every KV type: the cache rolls back exactly.
TEST(Speculative, RollbackAtEveryPosition) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  const std::vector<int32_t> prompt = encode(*fx->target, kPrompts[1]);
  GenerateParams gp;
  gp.max_tokens = 30;
  gp.ignore_eos = true;
  for (KvOptions o : {kv(KvType::f16), kv(KvType::q8), kv(KvType::q4), kv(KvType::f16, 40, 4), kv(KvType::q4, 64, 4)}) {
    auto plain_s = session(*fx, o);
    const Gen ref = gen(*plain_s, prompt, gp);
    std::vector<int32_t> full = prompt;
    full.insert(full.end(), ref.tokens.begin(), ref.tokens.end());
    for (int right = 0; right <= 8; ++right) {
      auto s = session(*fx, o);
      ScriptedDrafter d(full, right, fx->target->config().n_vocab);
      GenerateParams sp = gp;
      sp.drafter = &d;
      sp.draft_min = sp.draft_max = 8;
      const Gen got = gen(*s, prompt, sp);
      ASSERT_EQ(got.tokens, ref.tokens) << kv_type_name(o.type) << " window " << o.window << ", " << right << " right";
      EXPECT_GT(got.stats.n_draft_passes, 0);
      // Every pass keeps its `right` guesses, but the last, which max_tokens may cut shorter.
      if (right < 8) {
        EXPECT_LE(got.stats.n_draft_accepted, right * got.stats.n_draft_passes);
        EXPECT_GE(got.stats.n_draft_accepted, right * (got.stats.n_draft_passes - 1));
      }
      // The session holds exactly the generated tokens that were evaluated: a plain step from
      // here gives the reference's logits.
      EXPECT_TRUE(std::equal(s->history().begin(), s->history().end(), full.begin()));
    }
  }
}

// Seeded sampling: the same tokens as plain sampling with the same seed (each token is drawn
// once, from its own position's logits).
TEST(Speculative, SeededSamplingDrawsPlainTokens) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  const std::vector<int32_t> prompt = encode(*fx->target, kPrompts[0]);
  for (DraftKind kind : {DraftKind::lookup, DraftKind::skip, DraftKind::model}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      GenerateParams gp;
      gp.max_tokens = 32;
      gp.sampling.temperature = 0.9f;
      gp.sampling.top_k = 40;
      gp.sampling.top_p = 0.95f;
      gp.sampling.repeat_penalty = 1.1f;
      gp.sampling.repeat_last_n = 64;
      gp.sampling.seed = seed;
      auto a = session(*fx, kv(KvType::f16));
      auto b = session(*fx, kv(KvType::f16));
      auto d = drafter(kind, *fx, *b);
      GenerateParams sp = gp;
      sp.drafter = d.get();
      EXPECT_EQ(gen(*a, prompt, gp).tokens, gen(*b, prompt, sp).tokens) << draft_kind_name(kind) << " seed " << seed;
    }
  }
}

// The acceptance rule leaves the distribution the target's: the second and third sampled tokens
// over 300 seeds, speculative (layer-skip drafts, often rejected at temperature 1.5) against
// plain sampling with other seeds; a two-sample chi-square test over the tokens seen >= 10
// times (the rest lumped), at p = 0.001.
TEST(Speculative, SamplingDistributionIsTheTargets) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  const std::vector<int32_t> prompt = encode(*fx->target, "Name a colour:");
  auto a = session(*fx, kv(KvType::f16));
  auto b = session(*fx, kv(KvType::f16));
  auto d = drafter(DraftKind::skip, *fx, *b);
  constexpr int kSeeds = 300;
  std::map<std::pair<int, int32_t>, std::array<int, 2>> counts;  // (position, token) -> plain, speculative
  int kept = 0, drafted = 0;
  for (int i = 0; i < kSeeds; ++i) {
    GenerateParams gp;
    gp.max_tokens = 3;
    gp.ignore_eos = true;
    gp.sampling.temperature = 1.5f;
    gp.sampling.seed = uint64_t(1000 + i);
    const Gen p = gen(*a, prompt, gp);
    gp.sampling.seed = uint64_t(500000 + i);
    gp.drafter = d.get();
    gp.draft_min = 2;
    const Gen q = gen(*b, prompt, gp);
    kept += q.stats.n_draft_accepted;
    drafted += q.stats.n_drafted;
    ASSERT_EQ(p.tokens.size(), 3u);
    ASSERT_EQ(q.tokens.size(), 3u);
    for (int pos = 1; pos < 3; ++pos) {
      ++counts[{pos, p.tokens[size_t(pos)]}][0];
      ++counts[{pos, q.tokens[size_t(pos)]}][1];
    }
  }
  EXPECT_GT(drafted, 100);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, drafted);
  for (int pos = 1; pos < 3; ++pos) {
    std::vector<std::array<int, 2>> cells;
    std::array<int, 2> rest{0, 0};
    for (auto& [key, c] : counts) {
      if (key.first != pos) continue;
      if (c[0] + c[1] >= 10) cells.push_back(c);
      else rest[0] += c[0], rest[1] += c[1];
    }
    if (rest[0] + rest[1] > 0) cells.push_back(rest);
    ASSERT_GE(cells.size(), 3u) << "too few distinct tokens for a test at position " << pos;
    double chi2 = 0;
    for (auto& c : cells) {
      const double e = (c[0] + c[1]) / 2.0;  // equal sample sizes
      chi2 += (c[0] - e) * (c[0] - e) / e + (c[1] - e) * (c[1] - e) / e;
    }
    const int dof = int(cells.size()) - 1;
    // Wilson-Hilferty: the chi-square quantile at p = 0.001 (z = 3.09).
    const double z = 3.0902, h = 2.0 / (9.0 * dof);
    const double crit = dof * std::pow(1 - h + z * std::sqrt(h), 3);
    EXPECT_LT(chi2, crit) << "position " << pos << ", " << cells.size() << " cells";
  }
}

// A drafter that cancels the generation while drafting: the verify pass after it stops, the
// generation ends as cancelled, and the session goes on as plain decoding would.
class CancellingDrafter final : public Drafter {
 public:
  DraftKind kind() const override { return DraftKind::lookup; }
  Result<void> draft(Session& s, std::span<const int32_t> t, int max_n, std::vector<int32_t>& out) override {
    if (++calls_ == 3) s.request_cancel();
    for (int i = 0; i < max_n; ++i) out.push_back(t[t.size() - 1 - size_t(i) % t.size()]);
    return {};
  }

 private:
  int calls_ = 0;
};

TEST(Speculative, CancelMidVerify) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  const std::vector<int32_t> prompt = encode(*fx->target, kPrompts[2]);
  auto s = session(*fx, kv(KvType::f16));
  CancellingDrafter d;
  GenerateParams gp;
  gp.max_tokens = 30;
  gp.ignore_eos = true;
  gp.drafter = &d;
  gp.draft_min = 4;
  const Gen r = gen(*s, prompt, gp);
  EXPECT_EQ(r.stats.reason, EndReason::cancelled);
  EXPECT_LT(r.tokens.size(), 30u);
  // Afterwards: the same request without the drafter is plain decoding's.
  auto plain_s = session(*fx, kv(KvType::f16));
  gp.drafter = nullptr;
  EXPECT_EQ(gen(*s, prompt, gp).tokens, gen(*plain_s, prompt, gp).tokens);
}

// Under a grammar: the guesses it refuses are not verified, and the reply is plain decoding's.
TEST(Speculative, GrammarConstrainedIsPlain) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  auto g = compile_grammar(GrammarKind::json, "");
  ASSERT_TRUE(g.ok()) << g.error().message;
  LazyTokenVocab vocab;
  GenerateParams gp;
  gp.max_tokens = 48;
  gp.grammar.grammar = *g;
  gp.grammar.vocab = vocab.get(fx->target->tokenizer());
  const std::vector<int32_t> prompt = encode(*fx->target, "Give me a JSON object describing a cat.");
  auto a = session(*fx, kv(KvType::f16));
  auto b = session(*fx, kv(KvType::f16));
  auto d = drafter(DraftKind::lookup, *fx, *b);
  const Gen plain = gen(*a, prompt, gp);
  GenerateParams sp = gp;
  sp.drafter = d.get();
  const Gen spec = gen(*b, prompt, sp);
  EXPECT_EQ(plain.tokens, spec.tokens);
}

TEST(Speculative, BadDraftersAreErrors) {
  const Fixture* smol = fixture("smollm2");
  if (!smol) GTEST_SKIP() << "SmolLM2 not found";
  auto s = session(*smol, kv(KvType::f16));
  DraftSpec spec;
  spec.kind = DraftKind::skip;
  spec.skip_layers = {30};
  EXPECT_EQ(make_drafter(spec, *s).error().code, Status::invalid_argument);
  spec.skip_layers.clear();
  for (int l = 0; l < 30; ++l) spec.skip_layers.push_back(l);
  EXPECT_EQ(make_drafter(spec, *s).error().code, Status::invalid_argument);
  spec.kind = DraftKind::lookup;
  spec.max_tokens = 33;
  EXPECT_EQ(make_drafter(spec, *s).error().code, Status::invalid_argument);
  spec.max_tokens = 8;
  auto exact = session(*smol, kv(KvType::f16), ActMode::exact);
  auto refused = make_drafter(spec, *exact);
  ASSERT_FALSE(refused.ok()) << "exact mode's verify rows are not its one-row steps";
  EXPECT_NE(refused.error().message.find("int16"), std::string::npos) << refused.error().message;
  const Fixture* gemma = fixture("gemma3");
  if (!gemma) return;
  spec = {};
  spec.kind = DraftKind::model;
  spec.model = gemma->target;
  auto r = make_drafter(spec, *s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::invalid_argument);
  EXPECT_NE(r.error().message.find("vocabulary"), std::string::npos) << r.error().message;
}

TEST(Speculative, LookupProposesTheLatestMatchsContinuation) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  auto s = session(*fx, kv(KvType::f16));
  DraftSpec spec;
  spec.kind = DraftKind::lookup;
  auto d = make_drafter(spec, *s);
  ASSERT_TRUE(d.ok());
  std::vector<int32_t> out;
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 1, 2, 3, 5, 7, 8, 1, 2, 3};
  ASSERT_TRUE((*d)->draft(*s, t, 3, out).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{5, 7, 8}));  // the latest "1 2 3", not the first
  out.clear();
  ASSERT_TRUE((*d)->draft(*s, std::vector<int32_t>{4, 5, 6, 7}, 8, out).ok());
  EXPECT_TRUE(out.empty());
  out.clear();
  ASSERT_TRUE((*d)->draft(*s, std::vector<int32_t>{6, 6, 6}, 8, out).ok());  // overlapping: "6 6" at 0
  EXPECT_EQ(out, (std::vector<int32_t>{6}));
}

}  // namespace
}  // namespace pllm

namespace pllm {
namespace {
using namespace spec_test;

// What greedy identity rests on: a verify pass's rows are, bit for bit, the logits of plain
// one-token steps over the same tokens, for every KV type (int16 activations: the mode
// drafting needs; make_drafter refuses the others).
TEST(Speculative, VerifyRowsAreSingleSteps) {
  const Fixture* fx = fixture("smollm2");
  if (!fx) GTEST_SKIP() << "SmolLM2 not found";
  // A context past 600 positions: one-row steps split attention there (CpuLayers::decode_parts).
  std::vector<int32_t> prompt = encode(*fx->target, kPrompts[1]);
  for (int i = 0; i < 600; ++i) prompt.push_back(int32_t(200 + (53 * i) % 40000));
  const int nv = fx->target->config().n_vocab;
  // 7 rows (a verify pass) and 40
  std::vector<int32_t> next = {28, 339, 3060, 253, 3241, 540, 27063};
  for (int i = 0; i < 33; ++i) next.push_back(int32_t(100 + 37 * i));
  for (ActMode act : {ActMode::int16})
    for (KvType t : {KvType::f32, KvType::f16, KvType::q8, KvType::q4}) {
      SessionConfig cfg;
      cfg.n_ctx = 1024;
      cfg.n_threads = 2;
      cfg.kv.type = t;
      cfg.act = act;
      auto a = Session::create(fx->target, cfg);
      auto b = Session::create(fx->target, cfg);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_TRUE((*a)->eval_last(prompt).ok());
      ASSERT_TRUE((*b)->eval_last(prompt).ok());
      std::vector<float> rows(next.size() * size_t(nv));
      ASSERT_TRUE((*b)->eval_as_steps(next, rows.data()).ok());
      for (size_t i = 0; i < next.size(); ++i) {
        ASSERT_TRUE((*a)->eval_last({&next[i], 1}).ok());
        float worst = 0;
        for (int v = 0; v < nv; ++v) worst = std::max(worst, std::abs((*a)->last_logits()[v] - rows[i * size_t(nv) + size_t(v)]));
        EXPECT_EQ(worst, 0.0f) << kv_type_name(t) << (act == ActMode::exact ? " exact" : " int16") << " row " << i;
      }
    }
}

}  // namespace
}  // namespace pllm

namespace pllm {
namespace {

// The skip-layer file is outside input: every malformed one is one clear error (this suite
// runs under ASan too).
TEST(SkipFile, MalformedFilesAreErrors) {
  auto m = shared_real_model();
  if (!m) GTEST_SKIP() << "SmolLM2 not found";
  const std::string path = testing::TempDir() + "/skip_layers.json";
  auto with = [&](const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return load_skip_layers(path, *m);
  };
  SkipCalibration c;
  c.skip_layers = {3, 5};
  ASSERT_TRUE(save_skip_layers(path, *m, c).ok());
  auto good = load_skip_layers(path, *m);
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(*good, (std::vector<int>{3, 5}));
  std::string id;
  {
    std::ifstream f(path);
    id = nlohmann::json::parse(f)["model_identity"];
  }
  for (const std::string& bad : {std::string(""), std::string("{"), std::string("[]"), std::string("{\"skip_layers\": [1]}"),
                                 "{\"model_identity\": \"" + id + "\", \"skip_layers\": \"3\"}",
                                 "{\"model_identity\": \"" + id + "\", \"skip_layers\": [1.5]}",
                                 "{\"model_identity\": \"" + id + "\", \"skip_layers\": [\"x\"]}",
                                 std::string("{\"model_identity\": 7, \"skip_layers\": [1]}"), std::string(1 << 16, '['),
                                 std::string("\xff\xfe\x00", 3)}) {
    auto r = with(bad);
    EXPECT_FALSE(r.ok()) << bad.substr(0, 60);
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, Status::bad_format) << bad.substr(0, 60) << ": " << r.error().message;
    }
  }
  auto other = with("{\"model_identity\": \"0000000000000000\", \"skip_layers\": [1]}");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("another model"), std::string::npos);
  auto none = with("{\"model_identity\": \"" + id + "\", \"skip_layers\": []}");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no layers whose skipping pays"), std::string::npos);
  EXPECT_EQ(load_skip_layers(path + ".missing", *m).error().code, Status::io_error);
}

}  // namespace
}  // namespace pllm

namespace pllm {
namespace {

// The adaptive length: a plain step first (every cost is measured against it); long drafts while
// guesses are kept and cheap; none when they are not kept or cost as much as a step, with a
// probe of one guess after 16 plain steps, twice as many after each failed probe; a fixed
// length when min == max.
TEST(DraftLength, FollowsTheMeasuredAcceptanceAndCosts) {
  DraftLength good(0, 8, /*free_drafts=*/true);
  EXPECT_EQ(good.next(), 0);
  good.record_plain(10);
  for (int i = 0; i < 20; ++i) {
    const int k = good.next();
    ASSERT_GT(k, 0) << i;
    good.record_verify(k, k, 10 + 0.5 * k, 0);  // all kept, a row costs 5 % of a step
  }
  EXPECT_EQ(good.next(), 8);
  EXPECT_GT(good.acceptance(), 0.9);

  DraftLength bad(0, 8, /*free_drafts=*/false);
  EXPECT_EQ(bad.next(), 0);
  bad.record_plain(10);
  int k = bad.next();
  ASSERT_EQ(k, 1);  // a first try of one guess: its cost is not known yet
  bad.record_verify(k, 0, 10 + 1.0 * k, 8.0 * k);  // nothing kept, each guess costs 0.8 of a step
  int drafted = 0;
  for (int i = 0; i < 64; ++i) {
    k = bad.next();
    if (k == 0) {
      bad.record_plain(10);
    } else {
      ++drafted;
      EXPECT_EQ(k, 1) << "a probe is one guess";
      bad.record_verify(k, 0, 11, 8);
    }
  }
  // The first pass kept nothing (16 -> 32 steps between probes): one probe after 32 plain
  // steps, which fails too (-> 64): none more within 64 steps.
  EXPECT_EQ(drafted, 1);

  DraftLength fixed(4, 4, false);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(fixed.next(), 4);
}

// A drafter whose probes are dear (a draft model catching up with the tokens since its last
// guess: 29 steps' worth) and never right: the probes' loss stays within 5 % of the plain
// decoding time, however long the run (the doubling interval alone, at most 256 steps, would
// let it spend 12 %).
TEST(DraftLength, DearProbesStayWithinTheirShare) {
  DraftLength dear(0, 8, /*free_drafts=*/false);
  dear.record_plain(10);
  double plain_ms = 0, loss_ms = 0;
  int probes = 0;
  for (int i = 0; i < 5000; ++i) {
    const int k = dear.next();
    if (k == 0) {
      dear.record_plain(10);
      plain_ms += 10;
    } else {
      ASSERT_EQ(k, 1);
      ++probes;
      dear.record_verify(1, 0, 11, 290);
      loss_ms += 290 + 11 - 10;  // one token for the price of 30.1 steps
    }
  }
  EXPECT_GE(probes, 2);  // it still looks now and then
  EXPECT_LE(loss_ms, 0.05 * plain_ms + 290 + 11 - 10) << probes << " probes";  // the first try is outside the rule
}

// Guesses always kept but each costing a whole step (Gemma 3 270M skipping 3 of 18 layers: the
// output head is most of a step), a two-row pass 1.4 steps: two tokens for 2.4 steps, so even
// perfect guesses lose. Probes are then kept to one per 256 plain steps, kept or not.
TEST(DraftLength, GuessesThatCannotPayAreRarelyProbed) {
  DraftLength dear(0, 8, /*free_drafts=*/false);
  dear.record_plain(10);
  int probes = 0;
  for (int i = 0; i < 1024; ++i) {
    const int k = dear.next();
    if (k == 0) {
      dear.record_plain(10);
    } else {
      ASSERT_EQ(k, 1);
      ++probes;
      dear.record_verify(1, 1, 14, 10);
    }
  }
  EXPECT_LE(probes, 1 + 1024 / 256) << "the first try, then one per 256 steps";
  EXPECT_GE(probes, 2);
}

}  // namespace
}  // namespace pllm
