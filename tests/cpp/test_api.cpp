// The C API end to end on the real SmolLM2 file (skipped when it is absent): streaming,
// stop strings, cancellation, prefix reuse, progress callbacks and error reporting.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "pocketllm/pocketllm.h"
#include "real_model.h"

namespace {

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(real_model_path().c_str(), R_OK) != 0) return;
    ASSERT_EQ(pllm_model_load(real_model_path().c_str(), nullptr, &model_), PLLM_OK) << pllm_last_error();
  }
  static void TearDownTestSuite() {
    pllm_model_free(model_);
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "model not found at " << real_model_path() << " (run scripts/fetch_model.sh)";
    pllm_session_params sp = pllm_session_default_params();
    sp.n_ctx = 256;
    ASSERT_EQ(pllm_session_create(model_, &sp, &session_), PLLM_OK) << pllm_last_error();
  }
  void TearDown() override { pllm_session_free(session_); }

  std::vector<pllm_token> chat_prompt(const char* user) { return ::chat_prompt(model_, user); }
  std::string capital_answer(const pllm_session_params& sp);

  static pllm_model* model_;
  pllm_session* session_ = nullptr;
};
pllm_model* Api::model_ = nullptr;

struct Collected {
  std::string text;
  std::vector<pllm_token> tokens;
  int stop_after = -1;  // return non-zero after this many tokens
  pllm_session* cancel_session = nullptr;
};

int collect(pllm_token t, const char* text, size_t len, void* ud) {
  auto* c = static_cast<Collected*>(ud);
  if (t >= 0) c->tokens.push_back(t);
  c->text.append(text, len);
  if (c->cancel_session && c->tokens.size() == 3) pllm_session_cancel(c->cancel_session);
  return c->stop_after >= 0 && int(c->tokens.size()) >= c->stop_after ? 1 : 0;
}

pllm_sampling_params greedy(int max_tokens) {
  pllm_sampling_params p = pllm_sampling_default_params();
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

TEST_F(Api, GreedyStreamsTextThatMatchesDetokenize) {
  auto ids = chat_prompt("What is the capital of France?");
  Collected c;
  pllm_generation_stats st{};
  auto sp = greedy(32);
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &c, &st), PLLM_OK) << pllm_last_error();
  EXPECT_NE(c.text.find("Paris"), std::string::npos) << c.text;
  EXPECT_EQ(st.stop_reason, PLLM_STOP_EOG);
  EXPECT_EQ(st.n_generated, int(c.tokens.size()));
  std::string detok(4096, '\0');
  size_t n = 0;
  ASSERT_EQ(pllm_detokenize(model_, c.tokens.data(), c.tokens.size(), 0, detok.data(), detok.size(), &n), PLLM_OK);
  detok.resize(n);
  EXPECT_EQ(detok, c.text);
}

std::vector<pllm_token> prompt_tokens(const pllm_model* m, const std::string& text) {
  size_t n = 0;
  EXPECT_EQ(pllm_tokenize_prompt(m, text.data(), text.size(), nullptr, 0, &n), PLLM_ERR_OUT_OF_RANGE);
  std::vector<pllm_token> ids(n);
  EXPECT_EQ(pllm_tokenize_prompt(m, text.data(), text.size(), ids.data(), ids.size(), &n), PLLM_OK)
      << pllm_last_error();
  ids.resize(n);
  return ids;
}

TEST_F(Api, PromptTokensParseSpecialsAndKeepOneBos) {
  const std::string text = "<|im_start|>user\nHi<|im_end|>\n";
  std::vector<pllm_token> expect(64);
  size_t n = 0;
  ASSERT_EQ(pllm_tokenize(model_, text.data(), text.size(), pllm_model_add_bos(model_), 1, expect.data(),
                          expect.size(), &n), PLLM_OK);
  expect.resize(n);
  EXPECT_EQ(prompt_tokens(model_, text), expect);  // specials parsed, BOS as the model wants
  const pllm_token bos = pllm_model_bos(model_);
  ASSERT_GE(bos, 0);
  char piece[64];
  ASSERT_EQ(pllm_detokenize(model_, &bos, 1, 1, piece, sizeof piece, &n), PLLM_OK);
  // A template that writes BOS itself: one BOS, not two.
  const std::vector<pllm_token> with_bos = prompt_tokens(model_, std::string(piece, n) + text);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], bos);
  EXPECT_TRUE(with_bos.size() < 2 || with_bos[1] != bos);
  EXPECT_EQ(pllm_tokenize_prompt(nullptr, "x", 1, nullptr, 0, &n), PLLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, StopStringEndsAndIsNotEmitted) {
  auto ids = chat_prompt("What is the capital of France?");
  Collected c;
  pllm_generation_stats st{};
  auto sp = greedy(32);
  const char* stops[] = {"France is"};
  sp.stop_strings = stops;
  sp.n_stop_strings = 1;
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &c, &st), PLLM_OK);
  EXPECT_EQ(st.stop_reason, PLLM_STOP_STRING);
  EXPECT_EQ(c.text.find("France is"), std::string::npos) << c.text;
  EXPECT_EQ(c.text.find("Paris"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("capital of"), std::string::npos) << c.text;
}

TEST_F(Api, CallbackStopsAndCancelFromInsideStops) {
  auto ids = chat_prompt("Tell me a long story about a dragon.");
  Collected c;
  c.stop_after = 5;
  pllm_generation_stats st{};
  auto sp = greedy(100);
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &c, &st), PLLM_OK);
  EXPECT_EQ(st.stop_reason, PLLM_STOP_CALLBACK);
  EXPECT_EQ(c.tokens.size(), 5u);

  Collected d;
  d.cancel_session = session_;
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &d, &st), PLLM_OK);
  EXPECT_EQ(st.stop_reason, PLLM_STOP_CANCELLED);
  EXPECT_EQ(d.tokens.size(), 3u);
}

TEST_F(Api, CancelFromAnotherThread) {
  auto ids = chat_prompt("Tell me a long story about a dragon.");
  auto sp = greedy(100000);
  sp.max_tokens = 200;
  std::atomic<bool> started{false};
  struct Ctx { std::atomic<bool>* started; } ctx{&started};
  auto cb = [](pllm_token, const char*, size_t, void* ud) {
    static_cast<Ctx*>(ud)->started->store(true);
    return 0;
  };
  std::thread t([&] {
    while (!started.load()) std::this_thread::yield();
    pllm_session_cancel(session_);
  });
  pllm_generation_stats st{};
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, cb, &ctx, &st), PLLM_OK);
  t.join();
  EXPECT_EQ(st.stop_reason, PLLM_STOP_CANCELLED);
  EXPECT_LT(st.n_generated, 200);
}

TEST_F(Api, SecondTurnReusesThePrefix) {
  auto ids = chat_prompt("What is the capital of France?");
  auto sp = greedy(8);
  pllm_generation_stats st{};
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, nullptr, nullptr, &st), PLLM_OK);
  EXPECT_EQ(st.n_reused_tokens, 0);
  std::vector<pllm_token> longer = ids;
  longer.push_back(ids.back());
  ASSERT_EQ(pllm_generate(session_, longer.data(), longer.size(), &sp, nullptr, nullptr, &st), PLLM_OK);
  EXPECT_EQ(st.n_reused_tokens, int(ids.size()));
}

TEST_F(Api, PromptLongerThanContextIsAnError) {
  std::vector<pllm_token> ids(300, 28);
  auto sp = greedy(4);
  EXPECT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, nullptr, nullptr, nullptr), PLLM_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(pllm_last_error()).find("context"), std::string::npos) << pllm_last_error();
  const pllm_token bad = 1 << 30;
  EXPECT_EQ(pllm_session_eval(session_, &bad, 1, nullptr), PLLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, SameSeedSameTokens) {
  auto ids = chat_prompt("Write a poem.");
  auto run = [&](uint64_t seed) {
    pllm_session_reset(session_);
    pllm_sampling_params sp = pllm_sampling_default_params();
    sp.seed = seed;
    sp.max_tokens = 24;
    Collected c;
    EXPECT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &c, nullptr), PLLM_OK);
    return c.tokens;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

// The greedy answer (16 tokens) of a session with these parameters to the capital question.
std::string Api::capital_answer(const pllm_session_params& sp) {
  pllm_session* s = nullptr;
  EXPECT_EQ(pllm_session_create(model_, &sp, &s), PLLM_OK) << pllm_last_error();
  if (!s) return "";
  auto ids = chat_prompt("What is the capital of France?");
  Collected c;
  auto gp = greedy(16);
  EXPECT_EQ(pllm_generate(s, ids.data(), ids.size(), &gp, collect, &c, nullptr), PLLM_OK) << pllm_last_error();
  pllm_session_free(s);
  std::printf("answer: %s\n", c.text.c_str());
  return c.text;
}

// W4A16 session parameter: greedy "Paris" survives fp16 activations; int8 + f16 is refused.
TEST_F(Api, F16ActivationsSession) {
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 256;
  sp.f16_activations = 1;
  EXPECT_NE(capital_answer(sp).find("Paris"), std::string::npos);
  sp.int8_activations = 1;
  pllm_session* s = nullptr;
  EXPECT_EQ(pllm_session_create(model_, &sp, &s), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(pllm_last_error()).find("f16"), std::string::npos) << pllm_last_error();
}

// int16 activations: greedy "Paris" (they keep the near-tied first token that int8 flips);
// contradictory or unknown activation settings are refused.
TEST_F(Api, Int16ActivationsSession) {
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 256;
  sp.activations = PLLM_ACT_INT16;
  EXPECT_NE(capital_answer(sp).find("Paris"), std::string::npos);
  pllm_session* s = nullptr;
  for (auto set : {+[](pllm_session_params& p) { p.int8_activations = 1; },
                   +[](pllm_session_params& p) { p.f16_activations = 1; },
                   +[](pllm_session_params& p) { p.static_activations = 1; }}) {
    pllm_session_params bad = sp;
    set(bad);
    s = nullptr;
    EXPECT_EQ(pllm_session_create(model_, &bad, &s), PLLM_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(s, nullptr);
    bad.activations = PLLM_ACT_EXACT;
    EXPECT_EQ(pllm_session_create(model_, &bad, &s), PLLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pllm_last_error()).find("exact"), std::string::npos) << pllm_last_error();
  }
  sp.activations = 7;
  EXPECT_EQ(pllm_session_create(model_, &sp, &s), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("unknown activations"), std::string::npos) << pllm_last_error();
}

// Each mode has one word (the CLI's --act, serve, simulate and the bindings read them through
// these two functions), and the older flags ask for the same mode as the enum value: the same
// logits bit for bit.
TEST(ApiActivations, NamesAndParseRoundTrip) {
  const std::pair<int32_t, const char*> words[] = {{PLLM_ACT_INT16, "int16"}, {PLLM_ACT_EXACT, "exact"},
                                                   {PLLM_ACT_INT8, "int8"},   {PLLM_ACT_F16, "f16"},
                                                   {PLLM_ACT_STATIC, "static"}};
  for (const auto& [value, word] : words) {
    ASSERT_NE(pllm_activations_name(value), nullptr);
    EXPECT_STREQ(pllm_activations_name(value), word);
    int32_t parsed = -1;
    EXPECT_EQ(pllm_activations_parse(word, &parsed), PLLM_OK);
    EXPECT_EQ(parsed, value);
  }
  EXPECT_STREQ(pllm_activations_name(PLLM_ACT_DEFAULT), "int16");
  EXPECT_EQ(pllm_activations_name(6), nullptr);
  EXPECT_EQ(pllm_activations_name(-1), nullptr);
  int32_t out = 0;
  for (const char* bad : {"f32", "INT8", "", "int8 ", "default"}) {
    EXPECT_EQ(pllm_activations_parse(bad, &out), PLLM_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(pllm_last_error()).find("int16|exact|int8|f16|static"), std::string::npos) << pllm_last_error();
  }
  EXPECT_EQ(pllm_activations_parse(nullptr, &out), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pllm_activations_parse("int8", nullptr), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pllm_activations_repack(PLLM_ACT_INT8), PLLM_REPACK_ON);
  EXPECT_EQ(pllm_activations_repack(PLLM_ACT_STATIC), PLLM_REPACK_ON);
  EXPECT_EQ(pllm_activations_repack(PLLM_ACT_DEFAULT), PLLM_REPACK_AUTO);
  EXPECT_EQ(pllm_activations_repack(PLLM_ACT_INT16), PLLM_REPACK_AUTO);
  EXPECT_EQ(pllm_activations_repack(PLLM_ACT_EXACT), PLLM_REPACK_OFF);
  EXPECT_EQ(pllm_activations_repack(PLLM_ACT_F16), PLLM_REPACK_OFF);
}

TEST_F(Api, OlderActivationFlagsEqualTheEnumValues) {
  const std::vector<pllm_token> prompt = chat_prompt("What is the capital of France?");
  ASSERT_FALSE(prompt.empty());
  const size_t n_vocab = size_t(pllm_model_n_vocab(model_));
  auto logits = [&](const pllm_session_params& sp) {
    pllm_session* s = nullptr;
    std::vector<float> out(prompt.size() * n_vocab);
    EXPECT_EQ(pllm_session_create(model_, &sp, &s), PLLM_OK) << pllm_last_error();
    if (s) {
      EXPECT_EQ(pllm_session_eval(s, prompt.data(), prompt.size(), out.data()), PLLM_OK) << pllm_last_error();
    }
    pllm_session_free(s);
    return out;
  };
  pllm_session_params base = pllm_session_default_params();
  base.n_ctx = 256;
  struct Case {
    int32_t value;
    void (*older)(pllm_session_params&);
  } cases[] = {{PLLM_ACT_INT8, [](pllm_session_params& p) { p.int8_activations = 1; }},
               {PLLM_ACT_F16, [](pllm_session_params& p) { p.f16_activations = 1; }}};
  for (const Case& c : cases) {
    pllm_session_params by_value = base, by_flag = base, both = base;
    by_value.activations = c.value;
    c.older(by_flag);
    c.older(both);
    both.activations = c.value;  // both spellings of one mode agree
    const std::vector<float> want = logits(by_value);
    EXPECT_EQ(logits(by_flag), want) << pllm_activations_name(c.value);
    EXPECT_EQ(logits(both), want) << pllm_activations_name(c.value);
    EXPECT_NE(want, logits(base)) << "the mode changed nothing: the comparison would prove nothing";
  }
  pllm_session_params by_default = base, by_int16 = base;
  by_int16.activations = PLLM_ACT_INT16;
  EXPECT_EQ(logits(by_default), logits(by_int16));
  pllm_session_params clash = base;
  clash.int8_activations = 1;
  clash.activations = PLLM_ACT_F16;
  pllm_session* s = nullptr;
  EXPECT_EQ(pllm_session_create(model_, &clash, &s), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("f16 together with the int8 flag"), std::string::npos)
      << pllm_last_error();
  EXPECT_EQ(s, nullptr);
}

// The real model carries no static activation scales: every int8 product counts as
// dynamic, and a static-activation session is refused with a message that says why.
TEST_F(Api, StaticActivationsNeedScales) {
  int32_t n_static = -1, n_dynamic = -1;
  pllm_model_act_scale_counts(model_, &n_static, &n_dynamic);
  EXPECT_EQ(n_static, 0);
  EXPECT_EQ(n_dynamic, 30 * 7 + 1);  // SmolLM2: 30 layers x 7 products + the output head
  pllm_model_act_scale_counts(nullptr, &n_static, nullptr);
  EXPECT_EQ(n_static, 0);
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 64;
  sp.static_activations = 1;
  pllm_session* s = nullptr;
  EXPECT_EQ(pllm_session_create(model_, &sp, &s), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(pllm_last_error()).find("pocketllm.act_scale"), std::string::npos) << pllm_last_error();
}

// Prefix cache through the C API: a second session restores the first one's prompt prefix
// and generates the same greedy tokens; the cache outlives its handle while in use.
TEST_F(Api, PrefixCacheRestoresInAnotherSession) {
  pllm_prefix_cache_params cp = pllm_prefix_cache_default_params();
  pllm_prefix_cache* cache = nullptr;
  ASSERT_EQ(pllm_prefix_cache_create(model_, &cp, &cache), PLLM_OK) << pllm_last_error();
  ASSERT_EQ(pllm_session_set_prefix_cache(session_, cache), PLLM_OK);
  std::vector<pllm_token> ids = chat_prompt("Tell me about the history of Paris, the capital of France.");
  while (ids.size() < 140) ids.insert(ids.end() - 3, ids[5]);  // > 2 blocks of 64
  auto sp = greedy(8);
  Collected a, b;
  pllm_generation_stats st{};
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &a, &st), PLLM_OK);
  EXPECT_EQ(st.n_cached_tokens, 0);
  pllm_session_params p = pllm_session_default_params();
  p.n_ctx = 256;
  pllm_session* other = nullptr;
  ASSERT_EQ(pllm_session_create(model_, &p, &other), PLLM_OK);
  ASSERT_EQ(pllm_session_set_prefix_cache(other, cache), PLLM_OK);
  pllm_prefix_cache_free(cache);  // the sessions keep it alive
  ASSERT_EQ(pllm_generate(other, ids.data(), ids.size(), &sp, collect, &b, &st), PLLM_OK);
  EXPECT_EQ(st.n_cached_tokens, 128);
  EXPECT_EQ(a.tokens, b.tokens);
  pllm_session_free(other);
  EXPECT_EQ(pllm_session_set_prefix_cache(session_, nullptr), PLLM_OK);
  EXPECT_EQ(pllm_prefix_cache_stats(nullptr, nullptr), PLLM_ERR_INVALID_ARGUMENT);
}

TEST_F(Api, PrewarmThenGenerate) {
  auto ids = chat_prompt("What is the capital of France?");
  auto sp = greedy(8);
  Collected a, b;
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &a, nullptr), PLLM_OK);
  pllm_session_reset(session_);
  ASSERT_EQ(pllm_session_prewarm(session_, ids.data(), ids.size() - 2), PLLM_OK);
  ASSERT_EQ(pllm_session_prewarm_wait(session_), PLLM_OK) << pllm_last_error();
  pllm_generation_stats st{};
  ASSERT_EQ(pllm_generate(session_, ids.data(), ids.size(), &sp, collect, &b, &st), PLLM_OK);
  EXPECT_EQ(st.n_reused_tokens, int(ids.size()) - 2);
  EXPECT_EQ(a.tokens, b.tokens);
  const pllm_token bad = -1;
  EXPECT_EQ(pllm_session_prewarm(session_, &bad, 1), PLLM_ERR_INVALID_ARGUMENT);
  std::vector<pllm_token> too_long(300, 28);  // n_ctx is 256
  ASSERT_EQ(pllm_session_prewarm(session_, too_long.data(), too_long.size()), PLLM_OK);
  EXPECT_EQ(pllm_session_prewarm_wait(session_), PLLM_ERR_OUT_OF_RANGE);
}

TEST(ApiLoad, ProgressCallbackCanAbort) {
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found";
  pllm_model_params mp = pllm_model_default_params();
  std::vector<float> seen;
  mp.progress = [](float p, void* ud) {
    static_cast<std::vector<float>*>(ud)->push_back(p);
    return p >= 0.5f ? 1 : 0;
  };
  mp.progress_user_data = &seen;
  pllm_model* m = nullptr;
  EXPECT_EQ(pllm_model_load(real_model_path().c_str(), &mp, &m), PLLM_ERR_CANCELLED);
  EXPECT_EQ(m, nullptr);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front(), 0.0f);
}

}  // namespace
