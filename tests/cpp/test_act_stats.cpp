// Activation observer, calibration driver and activation statistics on the real SmolLM2
// file (skipped when it is absent): the observer sees every product's exact input, the
// statistics of layer 0's Q/K/V equal ones computed here from the embedding and the norm,
// the calibration logits equal a plain session's, and saved statistics load back and are
// refused for another model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"
#include "model/model.h"
#include "quantizer/act_stats.h"
#include "quantizer/calibration.h"
#include "real_model.h"
#include "runtime/session.h"

namespace pllm {
namespace {

std::shared_ptr<const Model> load_real() {
  if (access(real_model_path().c_str(), R_OK) != 0) return nullptr;
  auto r = Model::load(real_model_path(), false);
  return r.ok() ? r.value() : nullptr;
}

std::string tmp_path(const std::string& tag) {
  return ::testing::TempDir() + "pllm_actstats_" + std::to_string(getpid()) + "_" + tag + ".gguf";
}

// Eleven tokens of ordinary text (BOS replaced by the calibrator when the model adds one).
const std::vector<int32_t> kTokens = {6403, 1980, 253, 655, 665, 436, 253, 1838, 30, 2, 1838};

TEST(ActStats, ObserverSeesEveryProductAndExactInputs) {
  auto model = load_real();
  if (!model) GTEST_SKIP() << "model not found at " << real_model_path();
  const ModelConfig& c = model->config();
  CalibrationOptions o;
  o.n_ctx = 8;  // two chunks: 8 + 3 tokens
  o.n_batch = 4;
  o.max_tokens = 0;
  auto cal = Calibrator::create(model, o);
  ASSERT_TRUE(cal.ok()) << cal.error().message;
  ActStats st;
  int64_t batches = 0;
  auto r = cal.value()->run(kTokens, &st, [&](const CalibBatch& b) -> Result<void> {
    ++batches;
    EXPECT_EQ(b.n_vocab, c.n_vocab);
    return {};
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), int64_t(kTokens.size()));
  EXPECT_EQ(batches, 3);  // chunk 0: 4 + 4 tokens, chunk 1: 3

  // Every 2-D weight fed by an activation: 7 per layer plus the output head (tied: the
  // embedding's name).
  EXPECT_EQ(st.weights().size(), size_t(7 * c.n_layer + 1));
  const std::string head = model->file().tensor("output.weight") ? "output.weight" : "token_embd.weight";
  ASSERT_NE(st.find(head), nullptr);
  for (const auto& [name, s] : st.weights()) {
    EXPECT_EQ(s.count, kTokens.size()) << name;
    EXPECT_EQ(int64_t(s.cols()), int64_t(model->file().tensor(name)->dims[0])) << name;
  }

  // blk.0.attn_q's input is rmsnorm(embedding) * attn_norm: recompute its statistics.
  const Matrix& emb = model->weights().token_embd;
  const int E = c.n_embd;
  std::vector<double> sum_sq(size_t(E), 0.0), max_abs(size_t(E), 0.0);
  std::vector<float> row(static_cast<size_t>(E)), h(static_cast<size_t>(E));
  for (size_t i = 0; i < kTokens.size(); ++i) {
    int32_t id = kTokens[i];
    if ((i == 0 || i == 8) && model->tokenizer().add_bos()) id = model->tokenizer().bos();  // chunk starts
    kernels().for_type(emb.type).dequantize_row(emb.row(id), row.data(), E);
    rmsnorm_f32(row.data(), model->weights().layers[0].attn_norm, h.data(), E, c.rms_eps);
    for (int j = 0; j < E; ++j) {
      sum_sq[size_t(j)] += double(h[size_t(j)]) * h[size_t(j)];
      max_abs[size_t(j)] = std::max(max_abs[size_t(j)], double(std::fabs(h[size_t(j)])));
    }
  }
  const ChannelStats* q = st.find("blk.0.attn_q.weight");
  const ChannelStats* k = st.find("blk.0.attn_k.weight");
  ASSERT_NE(q, nullptr);
  ASSERT_NE(k, nullptr);
  for (int j = 0; j < E; ++j) {
    EXPECT_NEAR(q->sum_sq[size_t(j)], sum_sq[size_t(j)], 1e-9 * (1 + sum_sq[size_t(j)])) << j;
    EXPECT_EQ(q->max_abs[size_t(j)], max_abs[size_t(j)]) << j;
    EXPECT_EQ(k->sum_sq[size_t(j)], q->sum_sq[size_t(j)]) << j;  // Q and K share their input
  }
}

TEST(ActStats, CalibrationLogitsMatchAPlainSession) {
  auto model = load_real();
  if (!model) GTEST_SKIP() << "model not found at " << real_model_path();
  const int V = model->config().n_vocab;
  CalibrationOptions o;
  o.n_ctx = 16;
  o.n_batch = 5;
  o.max_tokens = 9;  // one chunk, cut short
  auto cal = Calibrator::create(model, o);
  ASSERT_TRUE(cal.ok());
  std::vector<float> got;
  ActStats st;
  auto r = cal.value()->run(kTokens, &st, [&](const CalibBatch& b) -> Result<void> {
    got.insert(got.end(), b.logits, b.logits + size_t(b.n) * size_t(V));
    return {};
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 9);

  SessionConfig sc;
  sc.n_ctx = 16;
  sc.kv.type = KvType::f32;
  sc.act = ActMode::exact;  // as the calibrator runs
  auto s = Session::create(model, sc);
  ASSERT_TRUE(s.ok());
  std::vector<int32_t> toks(kTokens.begin(), kTokens.begin() + 9);
  if (model->tokenizer().add_bos()) toks[0] = model->tokenizer().bos();
  std::vector<float> want(size_t(9) * size_t(V));
  ASSERT_TRUE(s.value()->eval(toks, want.data()).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i += 97) EXPECT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;

  // A callback error stops the run and is returned.
  auto stop = cal.value()->run(kTokens, nullptr, [](const CalibBatch&) -> Result<void> {
    return make_error(Status::cancelled, "stop here");
  });
  ASSERT_FALSE(stop.ok());
  EXPECT_EQ(stop.error().message, "stop here");
}

TEST(ActStats, SaveLoadAndModelCheck) {
  auto model = load_real();
  if (!model) GTEST_SKIP() << "model not found at " << real_model_path();
  CalibrationOptions o;
  o.n_ctx = 8;
  o.max_tokens = 0;
  auto cal = Calibrator::create(model, o);
  ASSERT_TRUE(cal.ok());
  ActStats st;
  ASSERT_TRUE(cal.value()->run(kTokens, &st, nullptr).ok());
  st.model_identity = model->identity();
  st.model_name = "smol";
  st.n_tokens = kTokens.size();
  st.source = "unit test";
  const std::string path = tmp_path("roundtrip");
  auto sv = st.save(path);
  ASSERT_TRUE(sv.ok()) << sv.error().message;

  auto ld = ActStats::load(path);
  ASSERT_TRUE(ld.ok()) << ld.error().message;
  const ActStats& back = ld.value();
  EXPECT_EQ(back.model_identity, model->identity());
  EXPECT_EQ(back.n_tokens, kTokens.size());
  EXPECT_EQ(back.source, "unit test");
  ASSERT_EQ(back.weights().size(), st.weights().size());
  for (const auto& [name, s] : st.weights()) {
    const ChannelStats* b = back.find(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->count, s.count);
    for (size_t j = 0; j < s.cols(); ++j) {
      EXPECT_EQ(b->sum_sq[j], double(float(s.sum_sq[j])));
      EXPECT_EQ(b->max_abs[j], double(float(s.max_abs[j])));
    }
  }
  EXPECT_TRUE(back.check_matches(model->file(), model->identity()).ok());
  auto other = back.check_matches(model->file(), model->identity() ^ 1);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("another model"), std::string::npos) << other.error().message;

  // A statistics file whose shapes do not fit the model.
  GgufWriter w;
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  w.copy_metadata(*f.value());
  std::vector<uint8_t> v(7 * 4, 0), one(4);
  const float cnt = 3;
  std::memcpy(one.data(), &cnt, 4);
  for (const char* s : {"sum_sq", "sum_abs", "max_abs"})
    ASSERT_TRUE(w.add_tensor(std::string("blk.0.attn_q.weight.") + s, 0, {7}, v).ok());
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight.count", 0, {1}, one).ok());
  const std::string bad = tmp_path("shape");
  ASSERT_TRUE(w.write(bad).ok());
  auto lb = ActStats::load(bad);
  ASSERT_TRUE(lb.ok()) << lb.error().message;
  auto m = lb.value().check_matches(model->file(), model->identity());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("do not match"), std::string::npos) << m.error().message;

  // Not a statistics file at all.
  auto nf = ActStats::load(real_model_path());
  ASSERT_FALSE(nf.ok());
  EXPECT_NE(nf.error().message.find("not an activation statistics file"), std::string::npos);
  unlink(path.c_str());
  unlink(bad.c_str());
}

}  // namespace
}  // namespace pllm
