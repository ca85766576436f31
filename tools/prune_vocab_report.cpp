// The vocabulary part of `pocketllm prune`'s report (tools/prune_vocab_report.h).
#include "prune_vocab_report.h"

#include <cstdio>

#include "quant/types.h"
#include "quantizer/prune.h"

namespace cli {

const char* const kVocabKeepHelp =
    "keep only part of the vocabulary, shrinking the embedding and output head: FILE keeps every token the "
    "model's tokenizer produces on that text; N (an integer, when no file of that name exists; write ./N for "
    "such a file) keeps the N most frequent tokens of the --calib text. Special and byte tokens and the pieces "
    "kept tokens are merged from always stay, so every text still tokenizes (outside the kept set into more, "
    "smaller tokens), but the model can never emit a dropped token";

void report_vocab_plan(const pllm::VocabPrune& v) {
  const double pct = 100.0 * double(v.keep.size()) / double(v.n_before);
  std::printf("vocabulary: %zu -> %zu tokens (%.1f%%) from %s: %zu from the text, %zu special/byte tokens, "
              "%zu pieces they are merged from\n",
              v.n_before, v.keep.size(), pct, v.source.c_str(), v.from_text, v.from_special, v.from_closure);
  if (v.merges_before > 0) std::printf("merges:     %zu -> %zu\n", v.merges_before, v.kept_merges.size());
  if (v.bytes_missing > 0)
    std::printf("note: %d of the 256 bytes have no token of their own in this vocabulary: the tokens that hold "
                "them are kept, so text with them tokenizes no worse than before\n", v.bytes_missing);
}

void report_vocab_bytes(const pllm::GgufFile& before, const pllm::GgufFile& after) {
  const std::string head = pllm::output_head_name(before);
  for (const char* name : {"output.weight", "token_embd.weight"}) {
    const pllm::TensorInfo* a = before.tensor(name);
    const pllm::TensorInfo* b = after.tensor(name);
    if (!a || !b) continue;
    std::printf("%-18s %s %.2f MB -> %s %.2f MB%s\n", name, pllm::type_traits(a->type)->name,
                double(a->n_bytes) / 1e6, pllm::type_traits(b->type)->name, double(b->n_bytes) / 1e6,
                name == head ? (head == "token_embd.weight" ? " (output head, tied)" : " (output head)") : "");
  }
}

}  // namespace cli
