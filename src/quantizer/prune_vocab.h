// Vocabulary pruning (`pocketllm prune --vocab-keep FILE|N`): the pruned model keeps only a
// subset of its tokens, so the rows of token_embd.weight and of the output head (or the tied
// embedding) shrink with it. On SmolLM2 the 49152 x 576 head is about a third of the bytes
// every decoded token reads; Gemma 3's vocabulary has 262K rows.
//
// Which tokens stay (plan_vocab_prune):
//   * the ones asked for: every token the model's tokenizer produces on a text, or the N
//     most frequent ones of a text;
//   * every token that is not plain text: token_type other than normal, tokens the tokenizer
//     itself treats as control (end markers recognised by their text, as llama.cpp does),
//     and every id a tokenizer.ggml.*_token_id key names or the tokenizer defaults to;
//   * every byte token (gpt2: the 256 byte-level symbols; llama/SentencePiece: <0x00>..<0xFF>),
//     so any text still tokenizes, falling back to smaller pieces and bytes (a byte without a
//     token of its own: every token holding it stays, see keep_byte_fallback);
//   * the closure: every piece a kept token can be merged from. BPE: for each merge "a b" with
//     a + b a kept string, a and b (recursively); only merges whose parts and result are all
//     kept remain, in their original order. SentencePiece: every two-piece split of a kept
//     token whose pieces can be symbols (tokens, or single characters), recursively.
// Why the closure makes text of kept tokens tokenize exactly as before: both merge
// algorithms (tokenizer/encode.cpp) apply, at every step, the best applicable merge. The
// pruned model's applicable merges are a subset of the original's, and every merge the
// original applied builds a piece of a kept token, so it is kept: the pruned run makes the
// same choice at every step and ends in the same pieces (renumbered).
//
// Ids are renumbered in ascending old-id order. Rows are copied byte for byte (never
// re-quantised) unless the head is re-quantised anyway (--output-type).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/types.h"
#include "quantizer/row_quant.h"
#include "tokenizer/vocab.h"

namespace pllm {

struct VocabPrune {
  std::vector<TokenId> keep;        // kept old ids, ascending: keep[new id] = old id
  std::vector<TokenId> new_id;      // [n_before]: the new id, or -1 for a dropped token
  std::vector<uint32_t> kept_merges;  // indices into the original merge list, ascending
  VocabData pruned;                 // the kept vocabulary, ids remapped (a tokenizer builds from it)
  size_t n_before = 0, merges_before = 0;
  // Where the kept tokens came from (each counted once, in this order).
  size_t from_text = 0;     // asked for: the text's tokens (or its top N)
  size_t from_special = 0;  // not plain text, byte tokens, named ids
  size_t from_closure = 0;  // pieces kept tokens are merged from
  int bytes_missing = 0;    // bytes the vocabulary has no byte token for (before and after)
  std::string source;       // pocketllm.prune.vocab_source: the file name, or "top N of <calib>"
};

// The keep set over the tokenizer's description alone (no files). wanted: ids to keep;
// special_ids: more ids to keep as specials (the file's *_token_id keys). Errors: a
// tokenizer model other than gpt2 / llama, a vocabulary without byte tokens, ids out of range.
Result<VocabPrune> plan_vocab_prune(const VocabData& vocab, const std::vector<TokenId>& wanted,
                                    const std::vector<TokenId>& special_ids = {});

// The n most frequent ids of a token sequence (ties: the lower id), fewer when fewer occur.
std::vector<TokenId> most_frequent_tokens(const std::vector<TokenId>& ids, size_t n);

// What --vocab-keep's argument names. An existing path is always a FILE; otherwise an
// integer (optional sign, digits only) is N; anything else is a FILE (that does not exist:
// reading it fails). So "./100" names a file called 100 even where none exists.
struct VocabKeepArg {
  std::string file;  // set for FILE
  int64_t top_n = 0;  // set (>= 1) for N
};
Result<VocabKeepArg> parse_vocab_keep(const std::string& arg);

// --vocab-keep ARG for the model in `f` with tokenizer `tok`: FILE's tokens, or the N most
// frequent tokens of calib_path (which must be given for N). Text is tokenized as plain text
// (no BOS, special-token text not parsed). Errors: unreadable or empty FILE, N < 1 or larger
// than the vocabulary, N without calib_path, and plan_vocab_prune's.
Result<VocabPrune> plan_vocab_keep(const GgufFile& f, const Tokenizer& tok, const std::string& arg,
                                   const std::string& calib_path);

// Rewrites the copied metadata for the kept vocabulary: tokenizer.ggml.tokens / token_type /
// scores / merges, every tokenizer.ggml.*_token_id, the bos/eos/unk ids the tokenizer took
// by default (written explicitly: the defaults are ids, and ids move), {arch}.vocab_size
// when present (arch_prefix: "<output arch>."), and pocketllm.prune.vocab_before /
// vocab_source. Error: another tokenizer array with one entry per token.
Result<void> write_vocab_metadata(GgufWriter& out, const GgufFile& f, const VocabPrune& v,
                                  const std::string& arch_prefix);

// token_embd.weight / output.weight: their kept rows (copied, or re-quantised to
// requant_to with `method` and `importance` ([cols] or empty) when it is set). Returns false
// for tensors without a row per token (the caller writes those). Error: another tensor with
// a row per token.
Result<bool> add_vocab_tensor(GgufWriter& out, const TensorInfo& t, const VocabPrune& v,
                              std::optional<TensorType> requant_to, QuantMethod method,
                              const std::vector<float>& importance, int n_threads);

}  // namespace pllm
