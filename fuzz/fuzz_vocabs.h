// Vocabularies for fuzz_tokenizer, built in code so the target runs anywhere: a byte-level
// BPE vocabulary (all 256 byte tokens, a few merges, control and user-defined specials) under
// every pre-tokenizer, and a SentencePiece one with byte fallback. Their token sets make
// decode(encode(text)) give the text back exactly (see fuzz_tokenizer.cpp), which the real
// vocabularies do not promise.
#pragma once
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace pllm::fuzz {

inline const char* const kPreNames[] = {"default", "gpt-2", "llama3", "qwen2", "starcoder", "deepseek-llm",
                                        "deepseek-coder", "deepseek-v3", "falcon", "bloom", "viking",
                                        "chatglm-bpe", "tekken", "gpt-4o"};

inline VocabData bpe_vocab(const char* pre) {
  VocabData d;
  d.model = "gpt2";
  d.pre = pre;
  for (int b = 0; b < 256; ++b) {
    d.tokens.push_back(byte_to_unicode(uint8_t(b)));
    d.types.push_back(1);
  }
  // Merges over the mapped alphabet ("Ġ" is the mapped space); each adds its merged token.
  const char* pairs[][2] = {{"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"}, {"i", "n"}, {"in", "g"},
                            {"e", "r"},        {"\xC4\xA0", "a"}, {"a", "n"}, {"an", "d"}, {"1", "2"},
                            {"12", "3"},       {"\xC4\x8A", "\xC4\x8A"}, {"\xC4\xA0", "\xC4\xA0"},
                            {"\xC3\x83", "\xC2\xA9"}};  // "é" as mapped bytes C3 A9
  for (const auto& p : pairs) {
    d.merges.push_back(std::string(p[0]) + " " + p[1]);
    d.tokens.push_back(std::string(p[0]) + p[1]);
    d.types.push_back(1);
  }
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>"}) {
    d.tokens.push_back(s);
    d.types.push_back(3);  // control: split out only with parse_special
  }
  d.tokens.push_back("<tool_call>");
  d.types.push_back(4);  // user-defined: always split out
  d.eos = TokenId(256 + std::size(pairs) + 2);  // <|im_end|>
  return d;
}

inline VocabData spm_vocab() {
  VocabData d;
  d.model = "llama";
  d.tokens = {"<unk>", "<s>", "</s>"};
  d.types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    d.tokens.push_back(buf);
    d.types.push_back(6);
  }
  const char* pieces[] = {"\xE2\x96\x81", "h", "e", "l", "o", "\xE2\x96\x81h", "he", "ll", "llo", "hello",
                          "\xE2\x96\x81hello", "\xC3\xA9", "\xE2\x96\x81\xE2\x96\x81", "1", "12"};
  for (const char* p : pieces) {
    d.tokens.push_back(p);
    d.types.push_back(1);
  }
  d.scores.assign(d.tokens.size(), 0.0f);
  for (size_t i = 259; i < d.scores.size(); ++i) d.scores[i] = -float(i - 258);  // earlier pieces merge first
  return d;
}

}  // namespace pllm::fuzz
