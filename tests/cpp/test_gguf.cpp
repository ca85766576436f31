// GGUF reader: a valid file parses with zero-copy tensor views; malformed variants fail
// with an error that names the file and field (the Python suite covers more corruption); bytes
// in memory (MappedFile::from_bytes, the fuzzers' way in) parse and load like the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "test_paths.h"

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

// MappedFile::from_bytes: the fuzzers' way in (no disk). Same result as the file; errors name
// the given path; the copy is independent of the caller's buffer; release() leaves it intact.
TEST(Gguf, ParsesFromBytesLikeFromFile) {
  std::vector<uint8_t> bytes = make_file();
  auto r = GgufFile::parse(MappedFile::from_bytes(bytes, "mem.gguf"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = **r;
  EXPECT_EQ(g.path(), "mem.gguf");
  EXPECT_EQ(g.file_size(), bytes.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(g.tensor("w")->data) % 32, 0u);  // aligned like a mapping
  std::fill(bytes.begin(), bytes.end(), 0);  // the caller's buffer is not the file
  g.release_pages(g.tensor("w")->data, 32);
  float v[8];
  std::memcpy(v, g.tensor("w")->data, 32);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[i], float(i));

  auto bad = make_file(32, 64);
  auto e = GgufFile::parse(MappedFile::from_bytes(bad, "mem.gguf"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("mem.gguf"), std::string::npos) << e.error().message;
  EXPECT_FALSE(GgufFile::parse(MappedFile::from_bytes({}, "empty.gguf")).ok());
}

// Model::load of bytes parsed in memory (how fuzz_gguf loads) gives the model the file gives.
// The files are fuzz_gguf's seeds, one per architecture: this also keeps them loadable.
TEST(Gguf, ModelFromBytesEqualsModelFromFile) {
  for (const char* name : {"llama_q4_0", "qwen2_q4_0", "gemma3_q4_0", "deci_ffnvar"}) {
    const std::string path = std::string(pllm::test::kSourceDir) + "/fuzz/corpus/fuzz_gguf/" + name + ".gguf";
    auto from_file = Model::load(path, false);
    ASSERT_TRUE(from_file.ok()) << from_file.error().message;
    std::vector<uint8_t> bytes;
    FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    for (int c; (c = std::fgetc(f)) != EOF;) bytes.push_back(uint8_t(c));
    std::fclose(f);
    auto parsed = GgufFile::parse(MappedFile::from_bytes(bytes, name));
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    auto from_bytes = Model::load(*parsed, false);
    ASSERT_TRUE(from_bytes.ok()) << from_bytes.error().message;
    const Model& a = **from_file;
    const Model& b = **from_bytes;
    EXPECT_EQ(a.identity(), b.identity()) << name;
    EXPECT_EQ(a.config().arch, b.config().arch);
    EXPECT_EQ(a.config().n_layer, b.config().n_layer);
    EXPECT_EQ(a.config().n_vocab, b.config().n_vocab);
    EXPECT_EQ(a.chat_family(), b.chat_family());
    EXPECT_EQ(a.tokenizer().encode("hello world", true, true).value(),
              b.tokenizer().encode("hello world", true, true).value());
  }
}

TEST(Gguf, MissingFileIsIoError) {
  auto r = GgufFile::open("/nonexistent/dir/x.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::io_error);
}

}  // namespace
}  // namespace pllm
