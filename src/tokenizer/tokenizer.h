// Tokenizer built from GGUF metadata: byte-level BPE (tokenizer.ggml.model = "gpt2",
// pre-tokenizer from tokenizer.ggml.pre) and SentencePiece BPE ("llama") with byte fallback.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"

namespace pllm {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Reads tokenizer.ggml.* from the file; works on vocab-only files (no tensors).
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);

  // add_special: prepend BOS / append EOS as the file's add_bos/add_eos flags say.
  // parse_special: text like "<|im_start|>" becomes its special/control token id.
  virtual Result<std::vector<TokenId>> encode(std::string_view text, bool add_special,
                                              bool parse_special) const = 0;
  // Raw bytes of one token (byte tokens like <0x0A> decoded, SPM "▁" -> " ", byte-level
  // BPE unicode mapping undone). Control tokens give "" unless render_special.
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;
  std::string decode(std::span<const TokenId> ids, bool render_special = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual TokenId bos() const = 0;  // -1 if none
  virtual TokenId eos() const = 0;  // -1 if none
  // Whether encode(add_special = true) prepends BOS (tokenizer.ggml.add_bos_token or the
  // model type's default).
  virtual bool add_bos() const = 0;
  virtual bool is_end_of_generation(TokenId id) const = 0;  // EOS, EOT, <|im_end|>, <|eot_id|>...
  // Exact token for a text such as "<|im_end|>"; -1 if none.
  virtual TokenId find_token(std::string_view text) const = 0;
};

// Holds back bytes of an incomplete UTF-8 character so a stream never splits one.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // Returns the text that is complete after appending this token (maybe empty).
  std::string push(TokenId id);
  // Whatever remains (invalid/incomplete bytes are emitted as U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace pllm
