// The scheduled runtime through the C API on the real SmolLM2 file (skipped when absent): the
// quick start through the runtime equals pllm_generate; many sessions on the driver thread;
// cancel from another thread; the app's thermal state reaches the governor; bad arguments get
// an error and a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pocketllm/pocketllm.h"
#include "real_model.h"

namespace {

class RuntimeApi : public ::testing::Test {
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
    if (!model_) GTEST_SKIP() << "model not found at " << real_model_path();
    pllm_engine_params ep = pllm_engine_default_params();
    ep.n_threads = 2;
    ASSERT_EQ(pllm_engine_create(&ep, &engine_), PLLM_OK);
  }
  void TearDown() override {
    pllm_runtime_free(rt_);
    pllm_engine_free(engine_);
  }
  void make_runtime(const pllm_runtime_params* p = nullptr) {
    ASSERT_EQ(pllm_runtime_create(engine_, model_, p, &rt_), PLLM_OK) << pllm_last_error();
  }
  int64_t add_session() {
    pllm_session_params sp = pllm_session_default_params();
    sp.n_ctx = 256;
    int64_t key = -1;
    EXPECT_EQ(pllm_runtime_add_session(rt_, &sp, &key), PLLM_OK) << pllm_last_error();
    return key;
  }
  std::vector<pllm_token> chat_prompt(const char* user) { return ::chat_prompt(model_, user); }

  static pllm_model* model_;
  pllm_engine* engine_ = nullptr;
  pllm_runtime* rt_ = nullptr;
};
pllm_model* RuntimeApi::model_ = nullptr;

struct Output {
  std::mutex mu;
  std::string text;
  std::vector<pllm_token> tokens;
  int ends = 0;
  pllm_end_reason reason = PLLM_END_FAILED;
  int n_generated = -1;
};

void on_event(const pllm_event* e, void* ud) {
  auto* o = static_cast<Output*>(ud);
  std::lock_guard lk(o->mu);
  if (e->kind == 0) {
    EXPECT_EQ(e->index, int(o->tokens.size()));
    o->tokens.push_back(e->token);
    o->text.append(e->text, e->text_len);
  } else {
    ++o->ends;
    o->reason = e->reason;
    o->n_generated = e->n_generated;
  }
}

pllm_request request_of(const std::vector<pllm_token>& prompt, int max_tokens, Output* out,
                        pllm_request_class klass = PLLM_CLASS_INTERACTIVE) {
  pllm_request r{};
  r.klass = klass;
  r.base_weight = -1;
  r.prompt = prompt.data();
  r.n_prompt = prompt.size();
  r.max_tokens = max_tokens;
  r.sampling = nullptr;  // the model's defaults: greedy for this file
  r.on_event = on_event;
  r.user_data = out;
  return r;
}

TEST_F(RuntimeApi, QuickStartEqualsGenerate) {
  const auto ids = chat_prompt("What is the capital of France?");
  pllm_session* s = nullptr;
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 256;
  ASSERT_EQ(pllm_session_create(model_, &sp, &s), PLLM_OK);
  pllm_sampling_params g = pllm_model_sampling_params(model_);
  g.max_tokens = 24;
  std::string want;
  ASSERT_EQ(pllm_generate(s, ids.data(), ids.size(), &g,
                          [](pllm_token, const char* t, size_t n, void* ud) {
                            static_cast<std::string*>(ud)->append(t, n);
                            return 0;
                          },
                          &want, nullptr),
            PLLM_OK);
  pllm_session_free(s);

  make_runtime();
  const int64_t key = add_session();
  Output out;
  pllm_request r = request_of(ids, 24, &out);
  uint64_t id = 0;
  ASSERT_EQ(pllm_runtime_submit(rt_, key, &r, &id), PLLM_OK) << pllm_last_error();
  int32_t state = -1;
  for (int i = 0; i < 1000 && out.ends == 0; ++i) ASSERT_EQ(pllm_runtime_step(rt_, &state), PLLM_OK);
  EXPECT_EQ(out.ends, 1);
  EXPECT_EQ(out.text, want);
  EXPECT_NE(out.text.find("Paris"), std::string::npos) << out.text;
  EXPECT_EQ(out.reason, PLLM_END_EOS);
  EXPECT_EQ(out.n_generated, int(out.tokens.size()));
  ASSERT_EQ(pllm_runtime_step(rt_, &state), PLLM_OK);
  EXPECT_EQ(state, 1) << "idle";
}

TEST_F(RuntimeApi, ManySessionsOnTheDriverThreadAndCancel) {
  make_runtime();
  ASSERT_EQ(pllm_runtime_start(rt_), PLLM_OK);
  EXPECT_NE(pllm_runtime_start(rt_), PLLM_OK) << "a second driver";
  const auto ids = chat_prompt("Tell me a long story about a dragon.");
  std::vector<Output> outs(4);
  std::vector<int64_t> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(add_session());
    pllm_request r = request_of(ids, i == 0 ? 200 : 12, &outs[size_t(i)], i ? PLLM_CLASS_BACKGROUND : PLLM_CLASS_INTERACTIVE);
    ASSERT_EQ(pllm_runtime_submit(rt_, keys.back(), &r, nullptr), PLLM_OK);
  }
  // Cancel the long one from this thread once it has produced a few tokens.
  for (int i = 0; i < 2000; ++i) {
    {
      std::lock_guard lk(outs[0].mu);
      if (outs[0].tokens.size() >= 3) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(pllm_runtime_control(rt_, keys[0], PLLM_CONTROL_CANCEL), PLLM_OK);
  EXPECT_EQ(pllm_runtime_wait_idle(rt_, 120000), 1);
  pllm_runtime_stop(rt_);
  EXPECT_EQ(outs[0].ends, 1);
  EXPECT_EQ(outs[0].reason, PLLM_END_CANCELLED);
  EXPECT_LT(outs[0].n_generated, 200);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(outs[size_t(i)].ends, 1);
    EXPECT_EQ(outs[size_t(i)].text, outs[1].text) << "same prompt, greedy: same text";
  }
}

TEST_F(RuntimeApi, AppThermalStateReachesTheGovernor) {
  pllm_runtime_params p = pllm_runtime_default_params();
  p.governor = 1;
  make_runtime(&p);
  ASSERT_EQ(pllm_runtime_set_thermal(rt_, 3, NAN), PLLM_OK) << pllm_last_error();
  const int64_t key = add_session();
  Output out;
  const auto ids = chat_prompt("Hi");
  pllm_request r = request_of(ids, 2, &out);
  ASSERT_EQ(pllm_runtime_submit(rt_, key, &r, nullptr), PLLM_OK);
  int32_t state = 0;
  for (int i = 0; i < 5 && pllm_runtime_thermal_level(rt_) == 0; ++i) ASSERT_EQ(pllm_runtime_step(rt_, &state), PLLM_OK);
  EXPECT_EQ(pllm_runtime_thermal_level(rt_), 3);
  EXPECT_NE(pllm_runtime_set_thermal(rt_, 9, NAN), PLLM_OK) << "level past shutdown";
  EXPECT_NE(pllm_runtime_set_ios_thermal_state(rt_, 4), PLLM_OK) << "no such iOS state";

  // iOS "fair" is AThermal light (1), on a runtime of its own (the first stays hot for a while).
  pllm_runtime* ios = nullptr;
  ASSERT_EQ(pllm_runtime_create(engine_, model_, &p, &ios), PLLM_OK);
  ASSERT_EQ(pllm_runtime_set_ios_thermal_state(ios, 1), PLLM_OK) << pllm_last_error();
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 256;
  int64_t k2 = 0;
  ASSERT_EQ(pllm_runtime_add_session(ios, &sp, &k2), PLLM_OK);
  Output out2;
  pllm_request r2 = request_of(ids, 2, &out2);
  ASSERT_EQ(pllm_runtime_submit(ios, k2, &r2, nullptr), PLLM_OK);
  for (int i = 0; i < 5 && pllm_runtime_thermal_level(ios) == 0; ++i) ASSERT_EQ(pllm_runtime_step(ios, &state), PLLM_OK);
  EXPECT_EQ(pllm_runtime_thermal_level(ios), 1);
  pllm_runtime_free(ios);
}

TEST_F(RuntimeApi, TraceHasARequestSpanAndStepCounters) {
  pllm_runtime_params p = pllm_runtime_default_params();
  p.trace_events = 4096;
  make_runtime(&p);
  const int64_t key = add_session();
  Output out;
  const auto ids = chat_prompt("Hi");
  pllm_request r = request_of(ids, 4, &out);
  uint64_t id = 0;
  ASSERT_EQ(pllm_runtime_submit(rt_, key, &r, &id), PLLM_OK);
  int32_t state = 0;
  for (int i = 0; i < 100 && out.ends == 0; ++i) ASSERT_EQ(pllm_runtime_step(rt_, &state), PLLM_OK);
  char* json = nullptr;
  ASSERT_EQ(pllm_runtime_trace_json(rt_, &json), PLLM_OK) << pllm_last_error();
  const std::string j = json;
  pllm_string_free(json);
  EXPECT_NE(j.find("\"ph\":\"b\""), std::string::npos) << "the request's async begin";
  EXPECT_NE(j.find("\"ph\":\"e\""), std::string::npos) << "the request's async end";
  EXPECT_NE(j.find("\"name\":\"step\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"kv_tokens\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"first_token\""), std::string::npos);
}

// One vsync callback for every runtime of an engine: a frame whose window is already over
// makes each of them wait (state 2) instead of stepping; period 0 leaves frame mode.
TEST_F(RuntimeApi, EngineFrameReachesEveryRuntime) {
  pllm_runtime* rts[2] = {nullptr, nullptr};
  std::vector<Output> outs(2);
  const auto ids = chat_prompt("Count to twenty.");
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(pllm_runtime_create(engine_, model_, nullptr, &rts[i]), PLLM_OK);
    pllm_session_params sp = pllm_session_default_params();
    sp.n_ctx = 256;
    int64_t key = 0;
    ASSERT_EQ(pllm_runtime_add_session(rts[i], &sp, &key), PLLM_OK);
    pllm_request r = request_of(ids, 20, &outs[size_t(i)]);
    ASSERT_EQ(pllm_runtime_submit(rts[i], key, &r, nullptr), PLLM_OK);
  }
  EXPECT_NE(pllm_engine_frame(engine_, 0, NAN), PLLM_OK) << "a period that is not a number";
  ASSERT_EQ(pllm_engine_frame(engine_, pllm_runtime_now_ms(rts[0]), 16.7), PLLM_OK) << pllm_last_error();
  for (pllm_runtime* rt : rts) {
    // The prompt, then max_tokens_per_frame (3) tokens: the frame has no more for it.
    int32_t state = -1;
    int ran = 0;
    for (int i = 0; i < 10 && state != 2; ++i) {
      ASSERT_EQ(pllm_runtime_step(rt, &state), PLLM_OK);
      ran += state == 0;
    }
    EXPECT_EQ(state, 2) << "the frame's tokens are used: wait for the next frame";
    EXPECT_LE(ran, 5);
  }
  EXPECT_NE(pllm_runtime_ui_frame(rts[0], 0, -1), PLLM_OK);
  EXPECT_EQ(pllm_runtime_ui_frame(rts[0], pllm_runtime_now_ms(rts[0]), 4.0), PLLM_OK);
  ASSERT_EQ(pllm_engine_frame(engine_, 0, 0), PLLM_OK);
  for (pllm_runtime* rt : rts) {
    int32_t state = -1;
    ASSERT_EQ(pllm_runtime_step(rt, &state), PLLM_OK);
    EXPECT_EQ(state, 0) << "flat out again";
  }
  pllm_runtime_free(rts[0]);  // leaves the engine's list
  ASSERT_EQ(pllm_engine_frame(engine_, pllm_runtime_now_ms(rts[1]) - 100.0, 16.7), PLLM_OK);
  // The runtime's own frames: a 40 ms period, so steps go on in every frame's window.
  ASSERT_EQ(pllm_runtime_frame_period(rts[1], 40.0), PLLM_OK);
  EXPECT_NE(pllm_runtime_frame_period(rts[1], -3.0), PLLM_OK);
  for (int i = 0; i < 4000 && outs[1].ends == 0; ++i) {
    int32_t state = -1;
    ASSERT_EQ(pllm_runtime_step(rts[1], &state), PLLM_OK);
    if (state == 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(outs[1].ends, 1) << "frames keep coming without a frame clock";
  pllm_engine_free(engine_);  // before its runtime: the runtime keeps what it needs
  engine_ = nullptr;
  pllm_runtime_free(rts[1]);
}

TEST_F(RuntimeApi, BadArgumentsGetAnError) {
  make_runtime();
  const int64_t key = add_session();
  Output out;
  std::vector<pllm_token> ids{1, 2, 3};
  pllm_request r = request_of(ids, 2, &out);
  EXPECT_NE(pllm_runtime_submit(nullptr, key, &r, nullptr), PLLM_OK);
  EXPECT_NE(pllm_runtime_submit(rt_, key, nullptr, nullptr), PLLM_OK);
  EXPECT_NE(pllm_runtime_submit(rt_, key + 100, &r, nullptr), PLLM_OK);
  EXPECT_NE(std::string(pllm_last_error()), "");
  r.klass = static_cast<pllm_request_class>(7);
  EXPECT_NE(pllm_runtime_submit(rt_, key, &r, nullptr), PLLM_OK);
  r = request_of(ids, 2, &out);
  r.prompt = nullptr;
  EXPECT_NE(pllm_runtime_submit(rt_, key, &r, nullptr), PLLM_OK);
  pllm_sampling_params bad = pllm_sampling_default_params();
  bad.top_p = 2.0f;
  r = request_of(ids, 2, &out);
  r.sampling = &bad;
  EXPECT_NE(pllm_runtime_submit(rt_, key, &r, nullptr), PLLM_OK);
  EXPECT_NE(pllm_runtime_control(rt_, key, static_cast<pllm_control>(9)), PLLM_OK);
  EXPECT_NE(pllm_runtime_set_thermal(rt_, 2, NAN), PLLM_OK) << "governor off";
  char* json = nullptr;
  EXPECT_NE(pllm_runtime_trace_json(rt_, &json), PLLM_OK) << "no trace asked for";
  EXPECT_EQ(json, nullptr);
  EXPECT_NE(pllm_runtime_frame(rt_, 0, INFINITY), PLLM_OK) << "a period that is not finite";
  EXPECT_NE(pllm_runtime_ui_frame(rt_, 0, NAN), PLLM_OK);
  EXPECT_NE(pllm_runtime_ui_frame(nullptr, 0, 1), PLLM_OK);
  EXPECT_EQ(pllm_runtime_frame(rt_, 0, 16.7), PLLM_OK);
  EXPECT_EQ(pllm_runtime_frame(rt_, 0, 0), PLLM_OK) << "leaves frame mode";
  EXPECT_NE(pllm_runtime_remove_session(rt_, key + 100), PLLM_OK);
  EXPECT_EQ(pllm_runtime_remove_session(rt_, key), PLLM_OK);
  pllm_runtime_params p = pllm_runtime_default_params();
  p.max_batch_rows = 0;
  pllm_runtime* bad_rt = nullptr;
  EXPECT_NE(pllm_runtime_create(engine_, model_, &p, &bad_rt), PLLM_OK);
  EXPECT_EQ(bad_rt, nullptr);
  p = pllm_runtime_default_params();
  p.trace_events = -5;
  EXPECT_NE(pllm_runtime_create(engine_, model_, &p, &bad_rt), PLLM_OK);
  p = pllm_runtime_default_params();
  p.ui_headroom = 1.5;
  EXPECT_NE(pllm_runtime_create(engine_, model_, &p, &bad_rt), PLLM_OK);
  p = pllm_runtime_default_params();
  p.interactive_ttft_bound_ms = -1;
  EXPECT_NE(pllm_runtime_create(engine_, model_, &p, &bad_rt), PLLM_OK);
  EXPECT_NE(pllm_runtime_create(nullptr, model_, nullptr, &bad_rt), PLLM_OK);
  EXPECT_EQ(pllm_runtime_wait_idle(nullptr, 1), 0);
}

}  // namespace
