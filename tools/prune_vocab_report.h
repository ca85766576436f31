// What `pocketllm prune --vocab-keep` prints: the kept vocabulary and the head's bytes.
#pragma once
#include "gguf/gguf.h"
#include "quantizer/prune_vocab.h"

namespace cli {

// The --vocab-keep help text: what FILE and N mean and how the argument is told apart.
extern const char* const kVocabKeepHelp;

// Tokens before -> after, where the kept ones come from, merges before -> after.
void report_vocab_plan(const pllm::VocabPrune& v);
// After writing: the bytes of the output head (and of an untied embedding) before -> after.
void report_vocab_bytes(const pllm::GgufFile& before, const pllm::GgufFile& after);

}  // namespace cli
