// In-session prefix reuse with every KV type and with a window.
//  * ResumeIsExact: after a turn, truncating to a shorter prefix keeps only what the cache
//    can resume from exactly: continuing from there gives bit-identical logits to a session
//    that evaluated the same tokens in the same calls without ever going further.
//  * SecondTurnMatchesFreshSession (f16): a second turn reusing the first turn's cache gives
//    the same greedy tokens as a fresh session prefilling the whole conversation. (With q8
//    and q4 the decode and prefill paths' f32 rounding differences can flip an int8/4-bit
//    rounding step, so only the exact-resume property is asserted for them.)
//  * PrefixReuseParts: the pieces generate(), the prewarm and the scheduled runtime share
//    (runtime/prefix_reuse.h): the common prefix kept, restore and offer through the prefix
//    cache (block-aligned, within the bounds asked, never into a windowed session), and
//    prefill_prefix's restore-then-compute.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "model/model.h"
#include "real_model.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "runtime/prefix_reuse.h"
#include "runtime/session.h"

namespace pllm {
namespace {

std::vector<int32_t> greedy(Session& s, const std::vector<int32_t>& prompt, int n, GenerateStats* stats) {
  GenerateParams gp;
  gp.sampling.temperature = 0.0f;
  gp.max_tokens = n;
  gp.ignore_eos = true;
  std::vector<int32_t> out;
  auto r = generate(s, prompt, gp, [&](int32_t t, std::string_view) {
    out.push_back(t);
    return true;
  });
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (r.ok() && stats) *stats = r.value();
  return out;
}

struct Case {
  KvOptions kv;
  int n_batch;
};

class PrefixReuse : public ::testing::TestWithParam<Case> {};

TEST_P(PrefixReuse, ResumeIsExact) {
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
  auto m = Model::load(real_model_path(), false);
  ASSERT_TRUE(m.ok()) << m.error().message;
  SessionConfig cfg;
  cfg.n_ctx = 512;
  cfg.n_threads = 2;
  cfg.kv = GetParam().kv;
  cfg.n_batch = GetParam().n_batch;
  std::vector<int32_t> toks(150);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int32_t(1000 + (i * 7919) % 20000);
  // The calls a session makes: a prompt of 70, then one token at a time (decode).
  auto replay = [&](Session& s, size_t upto) {
    size_t done = 0;
    while (done < upto) {
      const size_t n = done == 0 ? std::min<size_t>(70, upto) : 1;
      ASSERT_TRUE(s.eval_last({toks.data() + done, n}).ok());
      done += n;
    }
  };
#ifdef __SANITIZE_ADDRESS__
  const std::vector<size_t> keeps = {75};  // ~10x slower under AddressSanitizer
#else
  const std::vector<size_t> keeps = {110, 75, 3};
#endif
  for (size_t keep : keeps) {
    auto a = Session::create(m.value(), cfg);
    ASSERT_TRUE(a.ok()) << a.error().message;
    replay(*a.value(), 120);
    a.value()->truncate(keep);
    const size_t kept = a.value()->history().size();
    EXPECT_LE(kept, keep);
    ASSERT_TRUE(a.value()->eval_last({toks.data() + kept, toks.size() - kept}).ok());
    auto b = Session::create(m.value(), cfg);
    ASSERT_TRUE(b.ok());
    replay(*b.value(), kept);
    ASSERT_TRUE(b.value()->eval_last({toks.data() + kept, toks.size() - kept}).ok());
    const int n_vocab = m.value()->config().n_vocab;
    for (int v = 0; v < n_vocab; ++v)
      ASSERT_EQ(a.value()->last_logits()[v], b.value()->last_logits()[v])
          << "truncate(" << keep << ") kept " << kept << "; logit " << v;
  }
}

TEST_P(PrefixReuse, SecondTurnMatchesFreshSession) {
  if (GetParam().kv.type != KvType::f16) GTEST_SKIP() << "greedy identity is asserted for f16 (see top)";
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "too slow under AddressSanitizer; the release build runs it";
#endif
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
  auto m = Model::load(real_model_path(), false);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Tokenizer& tok = m.value()->tokenizer();
  SessionConfig cfg;
  cfg.n_ctx = 512;
  cfg.n_threads = 2;
  cfg.kv = GetParam().kv;
  cfg.n_batch = GetParam().n_batch;
  cfg.kv.type = GetParam().kv.type;

  auto s1 = Session::create(m.value(), cfg);
  ASSERT_TRUE(s1.ok()) << s1.error().message;
  auto t1 = tok.encode(
      "<|im_start|>user\nName three rivers in Europe and say one thing about each.<|im_end|>\n<|im_start|>assistant\n",
      true, true);
  ASSERT_TRUE(t1.ok());
  const std::vector<int32_t> turn1 = t1.value();
  GenerateStats st{};
  const std::vector<int32_t> answer1 = greedy(*s1.value(), turn1, 40, &st);
  ASSERT_EQ(answer1.size(), 40u);
  // Turn 2 = turn 1 + its answer + a new question: the session holds a prefix of it.
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), answer1.begin(), answer1.end());
  auto t2 = tok.encode("<|im_end|>\n<|im_start|>user\nWhich of them is the longest?<|im_end|>\n<|im_start|>assistant\n",
                       false, true);
  ASSERT_TRUE(t2.ok());
  const std::vector<int32_t> more = t2.value();
  turn2.insert(turn2.end(), more.begin(), more.end());
  const std::vector<int32_t> reused = greedy(*s1.value(), turn2, 24, &st);
  EXPECT_GT(st.n_reused, 0) << "nothing was reused";
  // The cache resumes only where it can do so exactly; that is all it may claim.
  EXPECT_LE(st.n_reused, int(turn1.size() + answer1.size()));

  auto s2 = Session::create(m.value(), cfg);
  ASSERT_TRUE(s2.ok());
  const std::vector<int32_t> fresh = greedy(*s2.value(), turn2, 24, nullptr);
  EXPECT_EQ(reused, fresh) << "reused " << st.n_reused << " of " << turn2.size() << " prompt tokens";
}

INSTANTIATE_TEST_SUITE_P(
    KvTypes, PrefixReuse,
    ::testing::Values(Case{{KvType::f16, 0, 4}, 64}, Case{{KvType::q8, 0, 4}, 64}, Case{{KvType::q4, 0, 4}, 64},
                      Case{{KvType::f16, 48, 4}, 8},   // the window slid during turn 1; what resuming needs is still stored
                      Case{{KvType::q8, 160, 4}, 16},  // a window that still covers the resume point
                      Case{{KvType::q4, 200, 4}, 16}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(kv_type_name(info.param.kv.type)) + "_w" + std::to_string(info.param.kv.window);
    });

class PrefixReuseParts : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = shared_real_model();
    if (!model_) GTEST_SKIP() << "model not found at " << real_model_path();
    auto pc = PrefixCache::create(model_->identity(), PrefixCacheParams{}, [](const std::string&) {});
    ASSERT_TRUE(pc.ok()) << pc.error().message;
    cache_ = *pc;
  }
  std::unique_ptr<Session> session(int window = 0) {
    SessionConfig cfg;
    cfg.n_ctx = 512;
    cfg.n_threads = 2;
    cfg.kv.window = window;
    auto s = Session::create(model_, cfg);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return std::move(*s);
  }
  std::shared_ptr<const Model> model_;
  std::shared_ptr<PrefixCache> cache_;
};

TEST_F(PrefixReuseParts, KeepsTheCommonPrefixUpToTheBound) {
  const std::vector<int32_t> a = synthetic_prompt(1, 100);
  std::vector<int32_t> b = a;
  b[70] += 1;  // differs from token 70 on
  auto s = session();
  ASSERT_TRUE(s->eval(a, nullptr).ok());
  EXPECT_EQ(keep_common_prefix(*s, b, b.size()), 70u);
  EXPECT_EQ(s->history(), std::vector<int32_t>(a.begin(), a.begin() + 70));
  EXPECT_EQ(keep_common_prefix(*s, b, 50), 50u);
  EXPECT_EQ(s->history().size(), 50u);
  EXPECT_EQ(keep_common_prefix(*s, a, a.size()), 50u);  // it only ever drops
}

TEST_F(PrefixReuseParts, OfferThenRestoreBlockAlignedPrefixes) {
  const std::vector<int32_t> p = synthetic_prompt(2, 150);
  auto a = session();
  ASSERT_TRUE(a->eval(p, nullptr).ok());
  offer_cached_prefix(*a, *cache_, 40);  // less than a block: nothing
  EXPECT_EQ(cache_->stats().inserts, 0u);
  offer_cached_prefix(*a, *cache_, p.size());  // tokens [0, 128)
  EXPECT_EQ(cache_->stats().inserts, 1u);
  EXPECT_TRUE(cache_->contains(a->kv_cache().type(), std::span(p).first(2 * PrefixCache::kBlock), a->compute_tag()));
  offer_cached_prefix(*a, *cache_, p.size());  // RAM has it already
  EXPECT_EQ(cache_->stats().inserts, 1u);

  auto b = session();
  EXPECT_EQ(restore_cached_prefix(*b, *cache_, p, 0, 127), 0u);  // the bound excludes the entry
  EXPECT_TRUE(b->history().empty());
  EXPECT_EQ(restore_cached_prefix(*b, *cache_, p, 0, 149), 128u);
  EXPECT_EQ(b->history(), std::vector<int32_t>(p.begin(), p.begin() + 128));
  EXPECT_EQ(restore_cached_prefix(*b, *cache_, p, 128, 149), 0u);  // nothing longer than what it holds
  EXPECT_EQ(restore_cached_prefix(*b, *cache_, p, 149, 149), 0u);
  // Continuing from the restored prefix gives the logits of computing it all.
  ASSERT_TRUE(a->eval_last(std::vector<int32_t>{7}).ok());
  ASSERT_TRUE(b->eval(std::span(p).subspan(128), nullptr).ok());
  ASSERT_TRUE(b->eval_last(std::vector<int32_t>{7}).ok());
  const int n_vocab = model_->config().n_vocab;
  EXPECT_EQ(std::vector<float>(a->last_logits(), a->last_logits() + n_vocab),
            std::vector<float>(b->last_logits(), b->last_logits() + n_vocab));
}

TEST_F(PrefixReuseParts, WindowedSessionsNeitherOfferNorRestore) {
  const std::vector<int32_t> p = synthetic_prompt(3, 150);
  auto w = session(/*window=*/96);
  ASSERT_FALSE(w->snapshots_supported());
  ASSERT_TRUE(w->eval(p, nullptr).ok());
  offer_cached_prefix(*w, *cache_, p.size());
  EXPECT_EQ(cache_->stats().inserts, 0u);
  auto a = session();
  ASSERT_TRUE(a->eval(p, nullptr).ok());
  offer_cached_prefix(*a, *cache_, p.size());
  auto w2 = session(/*window=*/96);
  EXPECT_EQ(restore_cached_prefix(*w2, *cache_, p, 0, 149), 0u);
  EXPECT_TRUE(w2->history().empty());
}

TEST_F(PrefixReuseParts, PrefillPrefixRestoresThenComputesThenOffers) {
  const std::vector<int32_t> p = synthetic_prompt(4, 150);
  std::vector<int32_t> longer = p;
  const std::vector<int32_t> more = synthetic_prompt(5, 100);
  longer.insert(longer.end(), more.begin(), more.end());  // 250 tokens
  auto a = session();
  a->set_prefix_cache(cache_);
  ASSERT_TRUE(prefill_prefix(*a, p).ok());
  EXPECT_EQ(a->history(), p);
  PrefixCacheStats st = cache_->stats();
  EXPECT_EQ(st.restored_tokens, 0u);
  EXPECT_EQ(st.computed_tokens, 150u);
  EXPECT_EQ(st.inserts, 1u);  // [0, 128)

  auto b = session();
  b->set_prefix_cache(cache_);
  ASSERT_TRUE(prefill_prefix(*b, longer).ok());
  EXPECT_EQ(b->history(), longer);
  st = cache_->stats();
  EXPECT_EQ(st.restored_tokens, 128u);
  EXPECT_EQ(st.computed_tokens, 150u + 122u);
  EXPECT_EQ(st.inserts, 2u);  // [0, 192)

  ASSERT_TRUE(prefill_prefix(*b, longer).ok());  // held already: nothing to do
  EXPECT_EQ(cache_->stats().computed_tokens, st.computed_tokens);
}

}  // namespace
}  // namespace pllm
