// Steady-state decoding allocates nothing: operator new and malloc are counted while a
// session decodes 64 tokens with the real model (skipped if absent), in both activation modes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "model/model.h"
#include "real_model.h"
#include "runtime/session.h"

namespace {
std::atomic<long> g_allocs{0};
std::atomic<bool> g_counting{false};
}  // namespace

// Replacing the global allocation functions counts every C++ allocation in this binary.
// AddressSanitizer owns operator new/delete itself, so the counting runs in the release
// build and is skipped (with a message) in the sanitizer build.
#if defined(__SANITIZE_ADDRESS__)
#define PLLM_COUNT_ALLOCS 0
#else
#define PLLM_COUNT_ALLOCS 1
void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, std::align_val_t a) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  const size_t al = static_cast<size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
#endif

namespace pllm {
namespace {

void expect_no_alloc_decoding(bool int8, bool f16 = false, KvOptions kv = {}, RepackMode repack = RepackMode::none) {
  if (!PLLM_COUNT_ALLOCS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer (release build runs it)";
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
  auto m = Model::load(real_model_path(), false, {}, repack);
  ASSERT_TRUE(m.ok()) << m.error().message;
  SessionConfig cfg;
  cfg.n_ctx = 256;
  cfg.n_threads = 2;
  cfg.act = int8 ? ActMode::int8 : f16 ? ActMode::f16 : kDefaultActMode;
  cfg.kv = kv;
  if (kv.window > 0) cfg.n_batch = 4;  // a small ring: 75 positions wrap it
  auto s = Session::create(m.value(), cfg);
  ASSERT_TRUE(s.ok()) << s.error().message;
  Session& session = *s.value();
  const int32_t prompt[] = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47};
  ASSERT_TRUE(session.eval_last(prompt).ok());
  int32_t tok = 28;
  ASSERT_TRUE(session.eval_last({&tok, 1}).ok());  // warm-up step
  g_allocs = 0;
  g_counting = true;
  for (int i = 0; i < 64; ++i) {
    const float* l = session.last_logits();
    int32_t best = 0;
    for (int v = 1; v < m.value()->config().n_vocab; ++v)
      if (l[v] > l[best]) best = v;
    tok = best;
    auto r = session.eval_last({&tok, 1});
    if (!r.ok()) {
      g_counting = false;
      FAIL() << r.error().message;
    }
  }
  g_counting = false;
  EXPECT_EQ(g_allocs.load(), 0) << "heap allocations during 64 decode steps";
}

TEST(NoAlloc, DecodeInt16) { expect_no_alloc_decoding(false); }
TEST(NoAlloc, DecodeInt8) { expect_no_alloc_decoding(true); }
// Repacked panels (where this CPU has panel kernels; the file's layout elsewhere).
TEST(NoAlloc, DecodeInt8Repacked) { expect_no_alloc_decoding(true, false, {}, RepackMode::all); }
TEST(NoAlloc, DecodeInt16Repacked) { expect_no_alloc_decoding(false, false, {}, RepackMode::int16); }
TEST(NoAlloc, DecodeF16) { expect_no_alloc_decoding(false, true); }
// Windows whose rings (24 slots for q8; 64 = two q4 groups) wrap within the 75 positions
// the test writes; q4 also quantises a group every 32 positions.
TEST(NoAlloc, DecodeWindowedQ8) { expect_no_alloc_decoding(false, false, {KvType::q8, 24, 4}); }
TEST(NoAlloc, DecodeWindowedQ4) { expect_no_alloc_decoding(false, false, {KvType::q4, 16, 4}); }

// A batched step of four sessions on one engine (Session::step), weights repacked as the C API
// does by default: after one warm-up step sizes the engine's scratch, decode steps allocate nothing.
TEST(NoAlloc, BatchedDecodeStep) {
  if (!PLLM_COUNT_ALLOCS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer (release build runs it)";
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
  auto m = Model::load(real_model_path(), false, {}, RepackMode::int16);
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto engine = Engine::create(2);
  ASSERT_TRUE(engine.ok());
  SessionConfig cfg;
  cfg.n_ctx = 256;
  std::vector<std::unique_ptr<Session>> sessions;
  const KvOptions kvs[4] = {{}, {KvType::q8, 0, 4}, {KvType::q4, 0, 4}, {KvType::f16, 24, 4}};
  for (const KvOptions& kv : kvs) {
    cfg.kv = kv;
    auto s = Session::create(m.value(), cfg, engine.value());
    ASSERT_TRUE(s.ok()) << s.error().message;
    sessions.push_back(std::move(s).value());
  }
  int32_t tok[4] = {28, 198, 1780, 314};
  std::vector<SessionStep> steps;
  for (int i = 0; i < 4; ++i) steps.push_back({sessions[size_t(i)].get(), {&tok[i], 1}, true, nullptr, {}});
  ASSERT_TRUE(Session::step(steps).ok());  // warm-up step
  g_allocs = 0;
  g_counting = true;
  for (int k = 0; k < 48; ++k) {
    for (int i = 0; i < 4; ++i) {
      const float* l = sessions[size_t(i)]->last_logits();
      int32_t best = 0;
      for (int v = 1; v < m.value()->config().n_vocab; ++v)
        if (l[v] > l[best]) best = v;
      tok[i] = best;
    }
    auto r = Session::step(steps);
    bool ok = r.ok();
    for (const SessionStep& st : steps) ok = ok && st.result.ok();
    if (!ok) {
      g_counting = false;
      FAIL() << "batched step failed";
    }
  }
  g_counting = false;
  EXPECT_EQ(g_allocs.load(), 0) << "heap allocations during 48 batched decode steps of 4 sessions";
}

TEST(NoAlloc, CounterWorks) {
  if (!PLLM_COUNT_ALLOCS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  g_allocs = 0;
  g_counting = true;
  auto* p = new std::string(100, 'x');  // the test would be vacuous if this went uncounted
  g_counting = false;
  delete p;
  EXPECT_GE(g_allocs.load(), 1);
}

}  // namespace
}  // namespace pllm
