// Internal tokenizer layer types: the plain vocabulary description (VocabData) that
// from_gguf fills, the concrete tokenizer built from it, and UTF-8 / byte-level helpers.
// Semantics follow llama.cpp's llama-vocab (test-tokenizer-0 vectors must match).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pllm {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

// Per-token attribute bits (a token can carry several, e.g. user_defined|control).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrLstrip = 1u << 6,
  kAttrRstrip = 1u << 7,
};

// Everything the tokenizer needs, independent of GGUF. Unset optionals take the
// defaults llama.cpp uses for the model type.
struct VocabData {
  std::string model = "gpt2";   // "gpt2" (byte-level BPE), "llama" (SentencePiece BPE), "gemma4"
  std::string pre = "default";  // tokenizer.ggml.pre
  std::string name;             // general.name (a few per-model token attribute quirks)
  std::vector<std::string> tokens;
  std::vector<float> scores;    // empty: all 0
  std::vector<int32_t> types;   // empty: all normal
  std::vector<std::string> merges;  // "left right", rank = index
  std::optional<TokenId> bos, eos, eot, eom, unk, pad;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Pre-tokenizer families (regex sets applied one after the other).
enum class PreType {
  default_, gpt2, llama3, qwen2, starcoder, deepseek_llm, deepseek_coder, deepseek3, falcon,
  bloom, viking, chatglm4, tekken, gpt4o,
  gemma4,  // tokenizer.ggml.model "gemma4": SentencePiece-style BPE (see VocabTokenizer::sp_bpe_)
};

struct PreConfig {
  PreType type = PreType::default_;
  bool ignore_merges = false;  // whole pre-token looked up in the vocab first
  bool add_bos = false;        // model-type default for add_bos
  bool no_default_bos = false; // chatglm: no BOS unless the file names one
};
// Resolves tokenizer.ggml.pre; error for names not known.
Result<PreConfig> resolve_pre_type(const std::string& pre);
const std::vector<std::string>& pre_regexes(PreType t);

// Splits text (valid UTF-8) with a sequence of regexes, llama.cpp unicode_regex_split
// style: each regex runs inside every chunk produced so far; unmatched gaps stay chunks.
class RegexSplitter {
 public:
  static Result<std::unique_ptr<RegexSplitter>> create(const std::vector<std::string>& regexes);
  ~RegexSplitter();
  // Returns chunk lengths in bytes (sum = text.size()).
  std::vector<size_t> split(std::string_view text) const;

 private:
  RegexSplitter() = default;
  std::vector<void*> codes_;  // pcre2_code_8*
};

// Rewrites \s / \S to llama.cpp's exact White_Space set (PCRE2 syntax).
std::string rewrite_whitespace_classes(const std::string& re);

// ---- UTF-8 helpers -------------------------------------------------------------
// Length of the UTF-8 sequence a lead byte announces (llama.cpp table: continuation
// bytes count as 1).
size_t utf8_len_from_lead(uint8_t c);
void append_utf8(std::string& out, uint32_t cp);
// Replaces invalid UTF-8 sequences with U+FFFD (one per invalid byte).
std::string sanitize_utf8(std::string_view s);
// Length of the longest prefix of s that does not end inside a valid-but-unfinished
// UTF-8 sequence (invalid bytes count as complete: the caller replaces them).
size_t utf8_complete_prefix(std::string_view s);

// Key of the merge (left, right) in the rank table.
std::string bpe_rank_key(std::string_view left, std::string_view right);

// GPT-2 byte <-> unicode mapping.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the mapped code point
int unicode_to_byte(uint32_t cp);               // -1 if not a mapped code point

// ---- the tokenizer -----------------------------------------------------------------
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

class VocabTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<VocabTokenizer>> create(VocabData data);

  Result<std::vector<TokenId>> encode(std::string_view text, bool add_special,
                                      bool parse_special) const override;
  std::string token_to_piece(TokenId id, bool render_special = false) const override;
  int32_t n_vocab() const override { return static_cast<int32_t>(text_.size()); }
  TokenId bos() const override { return bos_; }
  TokenId eos() const override { return eos_; }
  bool is_end_of_generation(TokenId id) const override { return eog_.count(id) != 0; }
  TokenId find_token(std::string_view text) const override;

  TokenId eot() const { return eot_; }
  TokenId eom() const { return eom_; }
  TokenId unk() const { return unk_; }
  TokenId pad() const { return pad_; }
  bool add_bos() const override { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool is_spm() const { return spm_; }
  const std::string& token_text(TokenId id) const { return text_.at(id); }
  uint32_t token_attr(TokenId id) const { return attr_.at(id); }

 private:
  VocabTokenizer() = default;
  struct Fragment {
    bool is_token;
    TokenId id;
    size_t off, len;
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void bpe_tokenize(std::string_view text, std::vector<TokenId>& out) const;
  void bpe_word(const std::string& word, std::vector<TokenId>& out) const;
  void spm_tokenize(const std::string& text, std::vector<TokenId>& out) const;
  int bpe_rank(std::string_view left, std::string_view right) const;
  TokenId byte_token(uint8_t b) const;

  bool spm_ = false;
  // tokenizer.ggml.model "gemma4" (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4): ranked BPE merges
  // over raw UTF-8 (no byte-level mapping) of text whose spaces became U+2581, split only into
  // runs of newlines and runs of other text; a run of newlines that is a token stays whole;
  // symbols outside the vocabulary fall back to <0xXX> byte tokens; decoding turns U+2581
  // back into spaces.
  bool sp_bpe_ = false;
  std::vector<std::string> text_;
  std::vector<float> score_;
  std::vector<uint32_t> attr_;
  TokenMap to_id_;
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> ranks_;
  std::vector<TokenId> special_cache_;  // partition order: longest text first
  std::unordered_set<TokenId> eog_;
  std::unique_ptr<RegexSplitter> splitter_;
  PreConfig pre_;
  TokenId bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

// Reads tokenizer.ggml.* (and general.name) into VocabData.
Result<VocabData> vocab_data_from_gguf(const GgufFile& file);

}  // namespace pllm
