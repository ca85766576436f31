#include "perplexity_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cli_common.h"

static_assert(std::endian::native == std::endian::little, "the logits file is written little-endian");

namespace cli {

namespace {

constexpr char kMagic[8] = {'P', 'L', 'L', 'M', 'L', 'O', 'G', 'P'};

void put32(unsigned char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void encode(const LogitsHeader& h, unsigned char* b) {
  std::memcpy(b, kMagic, 8);
  put32(b + 8, h.version);
  put32(b + 12, h.n_vocab);
  put32(b + 16, h.n_ctx);
  put32(b + 20, h.first);
  put32(b + 24, h.n_chunks);
  put32(b + 28, h.flags);
  put64(b + 32, h.n_rows);
  put64(b + 40, h.tokens_hash);
}

}  // namespace

uint64_t fnv1a64(const int32_t* ids, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    const auto v = uint32_t(ids[i]);
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  const int exp = int((x >> 23) & 0xff);
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf / nan
  const int e = exp - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7c00u);  // too large: inf
  if (e <= 0) {                                   // half subnormal (or zero)
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // a carry rounds into the exponent
  return uint16_t(sign | half);
}

namespace {
float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(float(mant | 0x400u), exp - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}
}  // namespace

float f16_to_f32(uint16_t h) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = f16_bits_to_f32(uint16_t(i));
    return t;
  }();
  return table[h];
}

// ---- writer -------------------------------------------------------------------------------------

LogitsWriter::LogitsWriter(const std::string& path, const LogitsHeader& h)
    : path_(path), part_(path + ".part"), h_(h), buf_(h.n_vocab) {
  f_ = std::fopen(part_.c_str(), "wb");
  if (!f_) fail("cannot write the logits file " + part_ + ": " + std::strerror(errno));
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  unsigned char b[LogitsHeader::kBytes];
  encode(h_, b);
  if (std::fwrite(b, 1, sizeof(b), f_) != sizeof(b)) fail("cannot write the logits file " + part_);
}

LogitsWriter::~LogitsWriter() {
  if (f_) {  // not finished: leave no partial file behind
    std::fclose(f_);
    std::remove(part_.c_str());
  }
}

void LogitsWriter::write_row(int32_t target, int32_t argmax, const float* logits, double lse) {
  for (uint32_t i = 0; i < h_.n_vocab; ++i)
    buf_[i] = f32_to_f16(float(std::max(double(logits[i]) - lse, -65504.0)));
  int32_t ids[2] = {target, argmax};
  if (std::fwrite(ids, 4, 2, f_) != 2 || std::fwrite(buf_.data(), 2, buf_.size(), f_) != buf_.size())
    fail("cannot write the logits file " + part_ + " (disk full?)");
  ++rows_;
}

void LogitsWriter::finish() {
  if (rows_ != h_.n_rows)
    fail("internal error: wrote " + std::to_string(rows_) + " logit rows, header says " + std::to_string(h_.n_rows));
  FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) {
    std::remove(part_.c_str());
    fail("cannot write the logits file " + part_ + " (disk full?)");
  }
  if (std::rename(part_.c_str(), path_.c_str()) != 0)
    fail("cannot rename " + part_ + " to " + path_ + ": " + std::strerror(errno));
}

// ---- reader -------------------------------------------------------------------------------------

LogitsReader::LogitsReader(const std::string& path, const LogitsHeader& want) : path_(path) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) fail("cannot read the base logits file " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fileno(f_), &st) != 0 || !S_ISREG(st.st_mode)) fail("base logits file " + path + " is not a regular file");
  unsigned char b[LogitsHeader::kBytes];
  if (std::fread(b, 1, sizeof(b), f_) != sizeof(b) || std::memcmp(b, kMagic, 8) != 0)
    fail(path + " is not a logits file written by `pocketllm perplexity --save-logits`");
  h_.version = get32(b + 8);
  h_.n_vocab = get32(b + 12);
  h_.n_ctx = get32(b + 16);
  h_.first = get32(b + 20);
  h_.n_chunks = get32(b + 24);
  h_.flags = get32(b + 28);
  h_.n_rows = get64(b + 32);
  h_.tokens_hash = get64(b + 40);
  if (h_.version != want.version)
    fail("base logits file " + path + " has version " + std::to_string(h_.version) + "; this build reads version " +
         std::to_string(want.version));
  const std::string base = "base logits file " + path;
  if (h_.n_vocab != want.n_vocab)
    fail(base + " has a vocabulary of " + std::to_string(h_.n_vocab) + " tokens, this model has " +
         std::to_string(want.n_vocab));
  if (h_.n_ctx != want.n_ctx)
    fail(base + " was made with -c " + std::to_string(h_.n_ctx) + ", this run uses -c " + std::to_string(want.n_ctx));
  if (h_.first != want.first)
    fail(base + " scores positions from " + std::to_string(h_.first) + ", this run from " +
         std::to_string(want.first) + " (--score-all must match)");
  if (h_.n_chunks != want.n_chunks)
    fail(base + " covers " + std::to_string(h_.n_chunks) + " chunks, this run " + std::to_string(want.n_chunks) +
         " (use the same text and --chunks)");
  if (h_.flags != want.flags || h_.tokens_hash != want.tokens_hash)
    fail(base + " was made from different tokens (another text, tokenizer or BOS handling)");
  if (h_.n_rows != want.n_rows) fail(base + " has " + std::to_string(h_.n_rows) + " rows, expected " +
                                     std::to_string(want.n_rows));
  const uint64_t size = LogitsHeader::kBytes + h_.n_rows * h_.row_bytes();
  if (uint64_t(st.st_size) != size)
    fail(base + " is " + std::to_string(st.st_size) + " bytes, its header says " + std::to_string(size) +
         " (truncated or damaged)");
  buf_.resize(h_.n_vocab);
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
}

LogitsReader::~LogitsReader() {
  if (f_) std::fclose(f_);
}

void LogitsReader::read_row(int32_t& target, int32_t& argmax, float* logp) {
  int32_t ids[2];
  if (std::fread(ids, 4, 2, f_) != 2 || std::fread(buf_.data(), 2, buf_.size(), f_) != buf_.size())
    fail("cannot read the base logits file " + path_);
  target = ids[0];
  argmax = ids[1];
  for (size_t i = 0; i < buf_.size(); ++i) logp[i] = f16_to_f32(buf_[i]);
}

}  // namespace cli
