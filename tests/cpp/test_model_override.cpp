// Model::override_matrix / restore_matrix (the sensitivity analysis' in-memory weight
// swap) on the real SmolLM2 file (skipped when absent): the same bytes give the same
// logits, other bytes change them, the tied embedding is swapped in both of its roles,
// restoring gives back the file's logits, and bad overrides are errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/model.h"
#include "quantizer/quantize_model.h"
#include "real_model.h"
#include "runtime/session.h"

namespace pllm {
namespace {

const std::vector<int32_t> kTokens = {6403, 1980, 253, 655, 665, 436, 253, 1838};

std::vector<float> logits(const std::shared_ptr<Model>& m) {
  SessionConfig sc;
  sc.n_ctx = 16;
  sc.kv.type = KvType::f32;
  auto s = Session::create(m, sc);
  EXPECT_TRUE(s.ok());
  std::vector<float> out(kTokens.size() * size_t(m->config().n_vocab));
  EXPECT_TRUE(s.value()->eval(kTokens, out.data()).ok());
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

TEST(ModelOverride, SwapsAndRestoresWeightViews) {
  if (access(real_model_path().c_str(), R_OK) != 0) GTEST_SKIP() << "model not found at " << real_model_path();
  auto r = Model::load_for_tools(real_model_path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::shared_ptr<Model> m = r.value();
  const std::vector<float> base = logits(m);

  // The same bytes at another address: identical logits.
  const std::string name = "blk.3.ffn_up.weight";
  const TensorInfo* t = m->file().tensor(name);
  ASSERT_NE(t, nullptr);
  std::vector<uint8_t> copy(t->data, t->data + t->n_bytes);
  ASSERT_TRUE(m->override_matrix(name, TensorType(t->type), copy.data()).ok());
  EXPECT_EQ(max_abs_diff(logits(m), base), 0.0);

  // Re-quantised to Q8_0: close to, but not exactly, the file's logits.
  auto x = dequantize_tensor(*t);
  ASSERT_TRUE(x.ok());
  ThreadPool pool(2);
  const auto q8 = quantize_matrix(x.value().data(), int64_t(t->dims[1]), int64_t(t->dims[0]), TensorType::Q8_0,
                                  QuantMethod::rtn, nullptr, pool);
  ASSERT_TRUE(m->override_matrix(name, TensorType::Q8_0, q8.data()).ok());
  const double d8 = max_abs_diff(logits(m), base);
  EXPECT_GT(d8, 0.0);
  EXPECT_LT(d8, 0.5);
  ASSERT_TRUE(m->restore_matrix(name).ok());
  EXPECT_EQ(max_abs_diff(logits(m), base), 0.0);

  // The tied embedding: zero weights make the embedding and the output head zero, so every
  // logit is exactly 0 (both views were swapped).
  const TensorInfo* e = m->file().tensor("token_embd.weight");
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(m->file().tensor("output.weight"), nullptr) << "SmolLM2 ties its output head";
  std::vector<uint8_t> zeros(size_t(*row_bytes(uint32_t(TensorType::F16), e->dims[0]) * e->dims[1]), 0);
  ASSERT_TRUE(m->override_matrix("token_embd.weight", TensorType::F16, zeros.data()).ok());
  for (float v : logits(m)) ASSERT_EQ(v, 0.0f);
  ASSERT_TRUE(m->restore_matrix("token_embd.weight").ok());
  EXPECT_EQ(max_abs_diff(logits(m), base), 0.0);

  // Errors: unknown or 1-D tensors, a type whose block does not fit the row (576 % 256).
  EXPECT_FALSE(m->override_matrix("no.such.weight", TensorType::Q8_0, q8.data()).ok());
  EXPECT_FALSE(m->override_matrix("blk.0.attn_norm.weight", TensorType::F32, q8.data()).ok());
  EXPECT_FALSE(m->override_matrix(name, TensorType::Q4_K, q8.data()).ok());
  EXPECT_EQ(max_abs_diff(logits(m), base), 0.0);
}

}  // namespace
}  // namespace pllm
