// The logits file of `pocketllm perplexity --save-logits` / `--kl-base`: the log-probabilities of
// every scored position, so a later run (another quantisation, KV type, activation mode...) can be
// compared token by token with this one.
//
// Layout, little-endian:
//   header (48 bytes)
//     char     magic[8]     "PLLMLOGP"
//     uint32   version      1
//     uint32   n_vocab
//     uint32   n_ctx        tokens per chunk (-c)
//     uint32   first        first scored position in a chunk (n_ctx/2, or 0 with --score-all)
//     uint32   n_chunks
//     uint32   flags        bit 0: the first token of each chunk was replaced by BOS
//     uint64   n_rows       scored positions in the file = n_chunks * (n_ctx - 1 - first)
//     uint64   tokens_hash  FNV-1a 64 over the evaluated token ids (int32 LE, all chunks)
//   n_rows rows, in scoring order
//     int32    target       the token that position predicts
//     int32    argmax       the most likely token (from the float logits, so ties do not flip)
//     uint16   logp[n_vocab]  log-softmax of the logits as IEEE half (clamped to >= -65504)
//
// Reading as numpy: header = np.fromfile(f, count=1, dtype=HEADER_DTYPE), rows =
// np.fromfile(f, offset=48, dtype=[("target", "<i4"), ("argmax", "<i4"), ("logp", "<f2", n_vocab)]).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cli {

struct LogitsHeader {
  uint32_t version = 1;
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;
  uint32_t first = 0;
  uint32_t n_chunks = 0;
  uint32_t flags = 0;
  uint64_t n_rows = 0;
  uint64_t tokens_hash = 0;
  static constexpr size_t kBytes = 48;
  static constexpr uint32_t kFlagBos = 1;
  size_t row_bytes() const { return 8 + 2 * size_t(n_vocab); }
};

uint64_t fnv1a64(const int32_t* ids, size_t n, uint64_t h = 0xcbf29ce484222325ull);
uint16_t f32_to_f16(float f);  // round to nearest even
float f16_to_f32(uint16_t h);

// Streams rows to PATH.part and renames it to PATH when finished, so an interrupted run never
// leaves a file that looks complete.
class LogitsWriter {
 public:
  LogitsWriter(const std::string& path, const LogitsHeader& h);  // fails (cli::Failure) if unwritable
  ~LogitsWriter();
  LogitsWriter(const LogitsWriter&) = delete;
  LogitsWriter& operator=(const LogitsWriter&) = delete;
  // Stores logits[i] - lse (the log-softmax) as half.
  void write_row(int32_t target, int32_t argmax, const float* logits, double lse);
  void finish();  // checks the row count, closes and renames

 private:
  std::string path_, part_;
  LogitsHeader h_;
  FILE* f_ = nullptr;
  uint64_t rows_ = 0;
  std::vector<uint16_t> buf_;
};

// Opens and validates a base file against the run it is compared with (clear cli::Failure on any
// mismatch), then hands out its rows in order.
class LogitsReader {
 public:
  LogitsReader(const std::string& path, const LogitsHeader& expected);
  ~LogitsReader();
  LogitsReader(const LogitsReader&) = delete;
  LogitsReader& operator=(const LogitsReader&) = delete;
  // Reads the next row; logp receives n_vocab floats.
  void read_row(int32_t& target, int32_t& argmax, float* logp);

 private:
  std::string path_;
  LogitsHeader h_;
  FILE* f_ = nullptr;
  std::vector<uint16_t> buf_;
};

}  // namespace cli
