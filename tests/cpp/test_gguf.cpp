// GGUF reader: a valid file parses with zero-copy tensor views; malformed variants fail
// with an error that names the file and field (the Python suite covers more corruption).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace pllm {
namespace {

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void str(const std::string& s) { u64(s.size()); raw(s.data(), s.size()); }
  void raw(const void* p, size_t n) { auto* b = static_cast<const uint8_t*>(p); bytes.insert(bytes.end(), b, b + n); }
  void pad(size_t align) { while (bytes.size() % align) bytes.push_back(0); }
  std::vector<uint8_t> bytes;
};

// A file with: general.architecture = "llama", general.alignment (optional), a u32 array,
// and one F32 tensor "w" of dims [4, 2].
std::vector<uint8_t> make_file(uint64_t alignment = 32, uint64_t tensor_offset = 0, uint32_t tensor_type = 0,
                               uint64_t dim0 = 4) {
  Writer w;
  w.u32(0x46554747);
  w.u32(3);
  w.u64(1);  // tensors
  w.u64(3);  // kvs
  w.str("general.architecture"); w.u32(8); w.str("llama");
  w.str("general.alignment"); w.u32(4); w.u32(uint32_t(alignment));
  w.str("test.array"); w.u32(9); w.u32(4); w.u64(3); w.u32(7); w.u32(8); w.u32(9);
  w.str("w"); w.u32(2); w.u64(dim0); w.u64(2); w.u32(tensor_type); w.u64(tensor_offset);
  w.pad(alignment ? alignment : 1);
  for (int i = 0; i < 8; ++i) w.f32(float(i));
  return w.bytes;
}

std::string write_tmp(const std::vector<uint8_t>& bytes) {
  static int counter = 0;
  // ctest runs tests as parallel processes: the pid keeps their files apart.
  std::string path = ::testing::TempDir() + "pllm_gguf_" + std::to_string(getpid()) + "_" +
                     std::to_string(counter++) + ".gguf";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

TEST(Gguf, ParsesValidFile) {
  auto path = write_tmp(make_file());
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r.value();
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.get_string("general.architecture").value(), "llama");
  auto arr = g.get_i64_array("test.array");
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ(arr.value(), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_FALSE(g.get_string_array("test.array").ok());  // wrong element type
  EXPECT_FALSE(g.get_string("general.alignment").ok());
  const TensorInfo* t = g.tensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->n_elements, 8u);
  EXPECT_EQ(t->n_bytes, 32u);
  float v[8];
  std::memcpy(v, t->data, 32);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[i], float(i));
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  auto path = write_tmp(bytes);
  auto r = GgufFile::open(path);
  ASSERT_FALSE(r.ok()) << "expected failure containing '" << fragment << "'";
  EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
}

TEST(Gguf, RejectsBadAlignment) {
  expect_error(make_file(0), "general.alignment");
  expect_error(make_file(3), "general.alignment");
}

TEST(Gguf, RejectsTensorPastEnd) { expect_error(make_file(32, 64), "past the end"); }
TEST(Gguf, RejectsMisalignedOffset) { expect_error(make_file(32, 4), "not aligned"); }
TEST(Gguf, RejectsUnknownTensorType) { expect_error(make_file(32, 0, 77), "unknown tensor type"); }
TEST(Gguf, RejectsRowNotMultipleOfBlock) { expect_error(make_file(32, 0, 2 /*Q4_0*/, 4), "block size"); }

TEST(Gguf, RejectsEveryTruncation) {
  const auto full = make_file();
  // Cut anywhere inside the header/metadata/tensor info/data: never a crash, always an error.
  for (size_t n = 0; n + 1 < full.size(); n += 3) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + long(n));
    auto r = GgufFile::open(write_tmp(cut));
    EXPECT_FALSE(r.ok()) << "truncated to " << n << " bytes was accepted";
  }
}

TEST(Gguf, RejectsHugeCounts) {
  auto b = make_file();
  uint64_t huge = uint64_t(1) << 62;
  std::memcpy(&b[8], &huge, 8);  // tensor_count
  expect_error(b, "tensor_count");
  b = make_file();
  std::memcpy(&b[16], &huge, 8);  // kv_count
  expect_error(b, "kv_count");
}

TEST(Gguf, MissingFileIsIoError) {
  auto r = GgufFile::open("/nonexistent/dir/x.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::io_error);
}

}  // namespace
}  // namespace pllm
