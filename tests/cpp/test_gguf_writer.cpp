// GgufWriter: what it writes reads back through GgufFile with the same keys, types,
// values, shapes and bytes; bad tensors and unwritable paths are clear errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/types.h"

namespace pllm {
namespace {

std::string tmp_path(const std::string& tag) {
  return ::testing::TempDir() + "pllm_writer_" + std::to_string(getpid()) + "_" + tag + ".gguf";
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(GgufWriter, EveryValueTypeRoundTrips) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u8("t.u8", 200);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -7);
  w.set_u64("t.u64", 0x123456789abcdefull);
  w.set_i64("t.i64", -1234567890123ll);
  w.set_f32("t.f32", 0.25f);
  w.set_f64("t.f64", -1.0 / 3.0);
  w.set_bool("t.bool", true);
  const std::vector<uint32_t> au32{1, 2, 3};
  const std::vector<int32_t> ai32{-1, 0, 5};
  const std::vector<uint64_t> au64{1ull << 40, 7};
  const std::vector<float> af32{0.5f, -2.0f};
  const std::vector<std::string> astr{"a", "", "hello world"};
  w.set_array_u32("t.au32", au32);
  w.set_array_i32("t.ai32", ai32);
  w.set_array_u64("t.au64", au64);
  w.set_array_f32("t.af32", af32);
  w.set_array_string("t.astr", astr);
  w.set_i32("t.replaced", 1);
  w.set_string("t.replaced", "now a string");
  w.set_u32("t.removed", 9);
  EXPECT_TRUE(w.remove("t.removed"));
  EXPECT_FALSE(w.remove("t.removed"));

  const std::vector<float> a{1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(w.add_tensor("a", uint32_t(TensorType::F32), {3, 2}, f32_bytes(a)).ok());
  ASSERT_TRUE(w.add_tensor("b", uint32_t(TensorType::F32), {1}, f32_bytes({42})).ok());
  std::vector<uint8_t> q(2 * 34, 0x11);  // two Q8_0 blocks: a [64] row
  ASSERT_TRUE(w.add_tensor("q", uint32_t(TensorType::Q8_0), {64}, q).ok());

  const std::string path = tmp_path("types");
  ASSERT_TRUE(w.write(path).ok());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r.value();
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.metadata().size(), w.n_keys());
  EXPECT_EQ(g.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(g.find("t.u8")->type, GgufType::u8);
  EXPECT_EQ(g.get_u64("t.u8").value(), 200u);
  EXPECT_EQ(g.find("t.u32")->type, GgufType::u32);
  EXPECT_EQ(g.get_u64("t.u32").value(), 4000000000u);
  EXPECT_EQ(g.find("t.i32")->type, GgufType::i32);
  EXPECT_EQ(std::get<int64_t>(g.find("t.i32")->scalar), -7);
  EXPECT_EQ(g.get_u64("t.u64").value(), 0x123456789abcdefull);
  EXPECT_EQ(std::get<int64_t>(g.find("t.i64")->scalar), -1234567890123ll);
  EXPECT_EQ(g.find("t.f32")->type, GgufType::f32);
  EXPECT_EQ(g.get_f64("t.f32").value(), 0.25);
  EXPECT_EQ(g.get_f64("t.f64").value(), -1.0 / 3.0);
  EXPECT_TRUE(g.get_bool("t.bool").value());
  EXPECT_EQ(g.get_i64_array("t.au32").value(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(g.find("t.au32")->elem_type, GgufType::u32);
  EXPECT_EQ(g.get_i64_array("t.ai32").value(), (std::vector<int64_t>{-1, 0, 5}));
  EXPECT_EQ(g.get_i64_array("t.au64").value(), (std::vector<int64_t>{int64_t(1) << 40, 7}));
  EXPECT_EQ(g.get_f64_array("t.af32").value(), (std::vector<double>{0.5, -2.0}));
  auto s = g.get_string_array("t.astr").value();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], "a");
  EXPECT_EQ(s[1], "");
  EXPECT_EQ(s[2], "hello world");
  EXPECT_EQ(g.get_string("t.replaced").value(), "now a string");
  EXPECT_EQ(g.find("t.removed"), nullptr);

  ASSERT_EQ(g.tensors().size(), 3u);
  const TensorInfo* ta = g.tensor("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dims, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(std::memcmp(ta->data, a.data(), 24), 0);
  const TensorInfo* tq = g.tensor("q");
  ASSERT_NE(tq, nullptr);
  EXPECT_EQ(tq->type, uint32_t(TensorType::Q8_0));
  EXPECT_EQ(std::memcmp(tq->data, q.data(), q.size()), 0);
  for (const TensorInfo& t : g.tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  unlink(path.c_str());
}

TEST(GgufWriter, CopiedMetadataIsIdenticalAndAlignmentIsRespected) {
  GgufWriter w;
  w.set_string("general.name", "first");
  w.set_array_string("tok", std::vector<std::string>{"x", "yz"});
  w.set_u32("general.alignment", 64);
  ASSERT_TRUE(w.add_tensor("t0", uint32_t(TensorType::F32), {3}, f32_bytes({1, 2, 3})).ok());
  ASSERT_TRUE(w.add_tensor("t1", uint32_t(TensorType::F32), {5}, f32_bytes({1, 2, 3, 4, 5})).ok());
  const std::string p1 = tmp_path("copy1"), p2 = tmp_path("copy2");
  ASSERT_TRUE(w.write(p1).ok());
  auto g1 = GgufFile::open(p1);
  ASSERT_TRUE(g1.ok()) << g1.error().message;
  EXPECT_EQ(g1.value()->alignment(), 64u);
  for (const TensorInfo& t : g1.value()->tensors()) {
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);  // the mapping is page-aligned
  }

  GgufWriter w2;
  w2.copy_metadata(*g1.value());
  w2.set_string("general.name", "second");
  ASSERT_TRUE(w2.write(p2).ok());
  g1 = Result<std::shared_ptr<GgufFile>>(make_error(Status::internal, "closed"));  // drop the mapping
  auto g2 = GgufFile::open(p2);
  ASSERT_TRUE(g2.ok()) << g2.error().message;
  EXPECT_EQ(g2.value()->get_string("general.name").value(), "second");
  EXPECT_EQ(g2.value()->get_u64("general.alignment").value(), 64u);
  EXPECT_EQ(g2.value()->find("general.alignment")->type, GgufType::u32);
  auto tok = g2.value()->get_string_array("tok").value();
  ASSERT_EQ(tok.size(), 2u);
  EXPECT_EQ(tok[1], "yz");
  EXPECT_TRUE(g2.value()->tensors().empty());
  unlink(p1.c_str());
  unlink(p2.c_str());
}

TEST(GgufWriter, BadTensorsAreErrors) {
  GgufWriter w;
  auto expect_err = [](Result<void> r, const char* fragment) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
  };
  expect_err(w.add_tensor("x", 4, {4}, std::vector<uint8_t>(16)), "unknown ggml type");
  expect_err(w.add_tensor("x", uint32_t(TensorType::Q4_0), {33}, std::vector<uint8_t>(18)), "not a multiple");
  expect_err(w.add_tensor("x", uint32_t(TensorType::F32), {4, 2}, std::vector<uint8_t>(16)), "needs 32");
  expect_err(w.add_tensor("x", uint32_t(TensorType::F32), {4, 0}, std::vector<uint8_t>(0)), "zero");
  expect_err(w.add_tensor("x", uint32_t(TensorType::F32), {}, std::vector<uint8_t>(0)), "1 to 4");
  expect_err(w.add_tensor(std::string(64, 'n'), uint32_t(TensorType::F32), {1}, std::vector<uint8_t>(4)), "name");
  ASSERT_TRUE(w.add_tensor("x", uint32_t(TensorType::F32), {1}, std::vector<uint8_t>(4)).ok());
  expect_err(w.add_tensor("x", uint32_t(TensorType::F32), {1}, std::vector<uint8_t>(4)), "twice");
  EXPECT_EQ(w.n_tensors(), 1u);

  w.set_u32("general.alignment", 48);
  expect_err(w.write(tmp_path("badalign")), "power of two");
  w.set_u32("general.alignment", 32);
  // Never replaces something that is not a regular file (a FIFO stands in for a device
  // such as /dev/null, which a regression here must not be able to clobber).
  const std::string fifo = tmp_path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& p : {fifo, ::testing::TempDir()}) {
    auto dev = w.write(p);
    ASSERT_FALSE(dev.ok()) << p;
    EXPECT_NE(dev.error().message.find("not a regular file"), std::string::npos) << dev.error().message;
  }
  struct stat st {};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  unlink(fifo.c_str());
  const std::string missing_dir = ::testing::TempDir() + "no/such/dir/out.gguf";
  auto r = w.write(missing_dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::io_error);
  EXPECT_NE(r.error().message.find("no/such/dir"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace pllm
