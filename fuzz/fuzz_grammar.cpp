// The GBNF parser and the grammar matcher on outside input: every grammar parses or fails with
// one error, and every text / token sequence is accepted or refused, within the bounds (no crash,
// hang or runaway memory). Input: GBNF text, a 0x00 byte, then the text to match. The mask of a
// tiny vocabulary (with split UTF-8 characters) is checked against per-token walks at each state.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"

namespace {

const std::shared_ptr<const pllm::TokenVocab>& vocab() {
  static const auto v = pllm::TokenVocab::from_pieces(
      {"a", "b", "ab", "\"", "{", "}", "[", "]", ":", ",", " ", "0", "12", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82",
       "\xAC", "x", "xx", "\n", "", "<eos>", "\\", "-", "."},
      {22});
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view gbnf = input.substr(0, split);
  const std::string_view text = split == std::string_view::npos ? std::string_view{} : input.substr(split + 1);
  pllm::GrammarLimits limits;
  limits.max_rules = 20000;
  limits.max_elements = 200000;
  limits.max_repetition = 1000;
  auto g = pllm::parse_gbnf(gbnf, "root", limits);
  if (!g.ok()) return 0;
  // The printed grammar must parse again.
  if (!pllm::parse_gbnf(pllm::grammar_to_gbnf(*g.value()), "root").ok()) std::abort();
  pllm::GrammarMatcher m(g.value(), vocab());
  std::vector<uint8_t> mask(static_cast<size_t>(vocab()->n_vocab()));
  // Feed the text in chunks of 1..4 bytes, checking the mask against accepts() at each state.
  for (size_t pos = 0, step = 0; pos <= text.size() && step < 64; ++step) {
    m.allowed(mask);
    for (int32_t id = 0; id < vocab()->n_vocab(); ++id)
      if ((mask[static_cast<size_t>(id)] != 0) != m.accepts(id)) std::abort();
    if (pos == text.size()) break;
    const size_t n = 1 + (static_cast<uint8_t>(text[pos]) % 4);
    if (!m.accept_text(text.substr(pos, n))) break;
    pos += n;
  }
  (void)m.is_finished();
  (void)m.rollback(2);
  (void)m.accept_text(text);
  return 0;
}
