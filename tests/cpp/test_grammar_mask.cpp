// GrammarMatcher over vocabularies: allowed() against independent oracles (a finite language
// enumerated by hand; per-token byte walks on SmolLM2's real 49k vocabulary), UTF-8 characters
// split across tokens, end-of-generation and control tokens, rollback, and hostile grammars and
// inputs that must stay bounded.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"
#include "gguf/gguf.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

using namespace pllm;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const Grammar> parse_ok(std::string_view gbnf) {
  auto r = parse_gbnf(gbnf);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : nullptr;
}

std::vector<uint8_t> mask_of(const GrammarMatcher& m, const TokenVocab& v) {
  std::vector<uint8_t> mask(static_cast<size_t>(v.n_vocab()), 7);
  m.allowed(mask);
  return mask;
}

// A vocabulary that splits multi-byte characters every way: é = C3 A9, € = E2 82 AC,
// 😀 = F0 9F 98 80.
std::shared_ptr<const TokenVocab> split_vocab() {
  std::vector<std::string> pieces = {
      "a", "b", "ab", "abc", "c", "!", "a!", "\xC3", "\xA9", "\xC3\xA9", "\xC3\xA9\xC3", "\xA9!",
      "\xE2", "\x82", "\xAC", "\xE2\x82", "\x82\xAC", "\xE2\x82\xAC", "\xE2\x82\xAC" "x", "x", "xx",
      "\xF0\x9F", "\x98\x80", "\xF0\x9F\x98", "\x80", "\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80!", "",
      "<eos>", "\xFF", "\xC0\x80", "\xED\xA0\x80", "é!", "ab", "!c",
  };
  const auto eos = static_cast<int32_t>(pieces.size() - 7);  // "<eos>"
  return TokenVocab::from_pieces(pieces, {eos});
}

// The finite language of this grammar, written out by hand (the oracle).
constexpr const char* kFiniteGrammar =
    "root ::= (\"ab\" | \"\xC3\xA9\" | \"\xE2\x82\xAC" "x\" | \"\xF0\x9F\x98\x80\") (\"c\" | \"\xC3\xA9\xC3\xA9\")? \"!\"";
const std::vector<std::string> kFiniteSentences = [] {
  std::vector<std::string> out;
  for (const char* head : {"ab", "\xC3\xA9", "\xE2\x82\xAC" "x", "\xF0\x9F\x98\x80"})
    for (const char* mid : {"", "c", "\xC3\xA9\xC3\xA9"}) out.push_back(std::string(head) + mid + "!");
  return out;
}();

bool oracle_prefix(const std::string& text) {
  for (const std::string& s : kFiniteSentences)
    if (s.compare(0, text.size(), text) == 0 && text.size() <= s.size()) return true;
  return false;
}
bool oracle_sentence(const std::string& text) {
  for (const std::string& s : kFiniteSentences)
    if (s == text) return true;
  return false;
}

TEST(grammar_mask, MatchesAnEnumeratedLanguageAcrossUtf8Splits) {
  auto g = parse_ok(kFiniteGrammar);
  ASSERT_TRUE(g);
  auto vocab = split_vocab();
  // Every prefix of every sentence is a state to check the mask in.
  std::vector<std::string> prefixes;
  for (const std::string& s : kFiniteSentences)
    for (size_t n = 0; n <= s.size(); ++n) prefixes.push_back(s.substr(0, n));
  int checked_allowed = 0;
  for (const std::string& prefix : prefixes) {
    GrammarMatcher m(g, vocab);
    ASSERT_TRUE(m.accept_text(prefix)) << prefix;
    EXPECT_EQ(m.is_complete(), oracle_sentence(prefix)) << prefix;
    const std::vector<uint8_t> mask = mask_of(m, *vocab);
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      const std::string piece(vocab->piece(id));
      bool want = false;
      if (vocab->is_end_of_generation(id)) {
        want = oracle_sentence(prefix);
      } else if (!piece.empty()) {
        want = oracle_prefix(prefix + piece);
      }
      EXPECT_EQ(mask[static_cast<size_t>(id)], want ? 1 : 0) << "prefix '" << prefix << "' token " << id;
      EXPECT_EQ(m.accepts(id), want) << "prefix '" << prefix << "' token " << id;
      checked_allowed += want;
    }
  }
  EXPECT_GT(checked_allowed, 100);  // the oracle is not trivially all-false
}

// Whether `s` is valid UTF-8, possibly ending inside a character (written here, apart from the
// matcher's decoder): no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8_prefix(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    const size_t len = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (len == 0) return false;
    for (size_t k = 1; k < len && i + k < s.size(); ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      uint8_t lo = 0x80, hi = 0xBF;
      if (k == 1 && b == 0xE0) lo = 0xA0;
      if (k == 1 && b == 0xED) hi = 0x9F;
      if (k == 1 && b == 0xF0) lo = 0x90;
      if (k == 1 && b == 0xF4) hi = 0x8F;
      if (c < lo || c > hi) return false;
    }
    i += len;
  }
  return true;
}

// "<" then any characters but ">" then ">": every non-ASCII code point behaves alike here, the
// case where the matcher merges unfinished characters into one state.
TEST(grammar_mask, AnyCharacterLoopMatchesAHandWrittenOracle) {
  auto g = parse_ok("root ::= \"<\" [^>]* \">\"");
  std::vector<std::string> pieces = {"<", ">", "a>", "<a", "\xE4", "\xB8", "\xAD", "\xE4\xB8", "\xB8\xAD",
                                     "\xE4\xB8\xAD", "\xE4\xB8\xAD\xE6", "\x96\x87>", "\xED\xA0", "\xE0\x80",
                                     "\xE0\xA0\x80", "\xF0\x90", "\xF4\x90", "\xF0\x9F\x98\x80", "\x80>", ">>", "x"};
  auto vocab = TokenVocab::from_pieces(pieces, {});
  auto viable = [](const std::string& text) {
    if (text.empty()) return true;
    if (text[0] != '<') return false;
    const std::string_view rest = std::string_view(text).substr(1);
    const size_t close = rest.find('>');
    if (close == std::string_view::npos) return valid_utf8_prefix(rest);
    return close + 1 == rest.size() && valid_utf8_prefix(rest.substr(0, close)) &&
           valid_utf8_prefix(std::string(rest.substr(0, close)) + "a");  // complete before '>'
  };
  int n_allowed = 0;
  for (const std::string& prefix : {std::string(), std::string("<"), std::string("<\xE4"), std::string("<\xE4\xB8"),
                                    std::string("<\xE4\xB8\xAD"), std::string("<\xF0\x9F"), std::string("<\xED")}) {
    GrammarMatcher m(g, vocab);
    ASSERT_TRUE(m.accept_text(prefix)) << prefix;
    const std::vector<uint8_t> mask = mask_of(m, *vocab);
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      const bool want = viable(prefix + std::string(vocab->piece(id)));
      EXPECT_EQ(mask[static_cast<size_t>(id)], want ? 1 : 0) << "prefix '" << prefix << "' token " << id;
      n_allowed += want;
    }
  }
  EXPECT_GT(n_allowed, 20);
}

TEST(grammar_mask, PartialCharacterCarriesToTheNextToken) {
  auto g = parse_ok("root ::= \"\xE2\x82\xAC\"+");
  auto vocab = split_vocab();
  GrammarMatcher m(g, vocab);
  const int32_t e2 = 12, x82 = 13, xac = 14;
  ASSERT_EQ(vocab->piece(e2), "\xE2");
  ASSERT_TRUE(m.accept(e2).ok());
  EXPECT_FALSE(m.is_complete());
  EXPECT_FALSE(m.accepts(e2));  // a lead byte cannot follow a lead byte
  ASSERT_TRUE(m.accept(x82).ok());
  EXPECT_FALSE(m.accepts(x82));
  EXPECT_TRUE(m.accepts(xac));
  ASSERT_TRUE(m.accept(xac).ok());
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_finished());  // another € may follow
  EXPECT_FALSE(m.accept_text("\x82"));
  EXPECT_TRUE(m.is_complete()) << "a refused text leaves the state unchanged";
}

TEST(grammar_mask, InvalidUtf8IsRefused) {
  auto g = parse_ok("root ::= .*");
  auto vocab = split_vocab();
  GrammarMatcher m(g, vocab);
  EXPECT_FALSE(m.accept_text("\xFF"));
  EXPECT_FALSE(m.accept_text("\xC0\x80"));          // overlong
  EXPECT_FALSE(m.accept_text("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(m.accept_text("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(m.accept_text("\x80"));
  EXPECT_TRUE(m.accept_text("a\xC3\xA9\xF0\x9F\x98\x80"));
}

TEST(grammar_mask, EndOfGenerationAndEmptyPieces) {
  auto g = parse_ok("root ::= \"a\" \"b\"?");
  auto vocab = split_vocab();
  const int32_t eos = 28, empty = 27;
  ASSERT_TRUE(vocab->is_end_of_generation(eos));
  ASSERT_EQ(vocab->piece(empty), "");
  GrammarMatcher m(g, vocab);
  EXPECT_FALSE(m.accepts(eos));
  EXPECT_FALSE(m.accepts(empty));
  EXPECT_FALSE(m.accept(eos).ok());
  ASSERT_TRUE(m.accept_text("a"));
  EXPECT_TRUE(m.accepts(eos));
  EXPECT_FALSE(m.accepts(empty));
  EXPECT_FALSE(m.is_finished());
  ASSERT_TRUE(m.accept_text("b"));
  EXPECT_TRUE(m.is_finished());
  std::vector<float> logits(static_cast<size_t>(vocab->n_vocab()) + 3, 1.0f);  // padded, as models do
  m.mask_logits(logits);
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_EQ(std::isinf(logits[i]), i != static_cast<size_t>(eos)) << i;
  EXPECT_TRUE(m.accept(eos).ok());
}

TEST(grammar_mask, RollbackRestoresExactly) {
  auto g = parse_ok("root ::= (\"ab\" | \"\xC3\xA9\")* \"!\"");
  auto vocab = split_vocab();
  GrammarMatcher m(g, vocab);
  const std::vector<int32_t> ids = {0, 1, 7, 8, 2, 9, 10, 11};  // a b C3 A9 ab é éC3 A9!
  std::vector<std::vector<uint8_t>> masks{mask_of(m, *vocab)};
  std::vector<bool> complete{m.is_complete()};
  for (int32_t id : ids) {
    ASSERT_TRUE(m.accept(id).ok()) << id;
    masks.push_back(mask_of(m, *vocab));
    complete.push_back(m.is_complete());
  }
  ASSERT_TRUE(complete.back());
  for (int back : {1, 3, 2}) {
    ASSERT_TRUE(m.rollback(back).ok());
    masks.resize(masks.size() - static_cast<size_t>(back));
    complete.resize(complete.size() - static_cast<size_t>(back));
    EXPECT_EQ(mask_of(m, *vocab), masks.back());
    EXPECT_EQ(m.is_complete(), complete.back());
  }
  EXPECT_FALSE(m.rollback(3).ok());  // only 2 steps left
  EXPECT_FALSE(m.rollback(-1).ok());
  ASSERT_TRUE(m.rollback(2).ok());
  EXPECT_EQ(mask_of(m, *vocab), masks.front());
  // History is bounded: 70 steps, the oldest 6 are gone.
  for (int i = 0; i < 70; ++i) ASSERT_TRUE(m.accept_text("ab"));
  EXPECT_TRUE(m.rollback(64).ok());
  EXPECT_FALSE(m.rollback(1).ok());
}

TEST(grammar_mask, HostileOptionalChainStaysBounded) {
  std::string gbnf = "root ::=";
  for (int i = 0; i < 1000; ++i) gbnf += " x?";
  gbnf += "\nx ::= \"x\"";
  auto g = parse_ok(gbnf);
  ASSERT_TRUE(g);
  auto vocab = TokenVocab::from_pieces({"x", "xx", "xxxx", "y"}, {});
  GrammarMatcher m(g, vocab);
  std::vector<uint8_t> mask = mask_of(m, *vocab);
  EXPECT_EQ(mask, (std::vector<uint8_t>{1, 1, 1, 0}));
  for (int i = 0; i < 250; ++i) ASSERT_TRUE(m.accept(2).ok()) << i;  // 1000 x's
  EXPECT_TRUE(m.is_finished());
  EXPECT_FALSE(m.accepts(0));
}

// Nested ambiguous repetitions: each level may end or go on after every character, so the parses
// to follow double per level. The matcher refuses past its bound (and says so) instead of
// spending minutes: found by fuzz_grammar (the input below, with `.` repeated 50 times).
TEST(grammar_mask, ExponentiallyAmbiguousGrammarHitsTheBound) {
  std::string item = "\"x\"";
  for (int i = 0; i < 40; ++i) item = "(" + item + "+ \"y\"?)";
  auto g = parse_ok("root ::= " + item + " \"!\"");
  ASSERT_TRUE(g);
  GrammarMatcher m(g, nullptr);
  EXPECT_FALSE(m.hit_bound());
  int accepted = 0;
  while (accepted < 100 && m.accept_text("x")) ++accepted;
  EXPECT_LT(accepted, 100);  // refused early: the parses outgrew the bound
  EXPECT_TRUE(m.hit_bound());
  // A shallow nesting of the same shape stays within the bound and matches.
  std::string shallow = "\"x\"";
  for (int i = 0; i < 4; ++i) shallow = "(" + shallow + "+ \"y\"?)";
  GrammarMatcher ok(parse_ok("root ::= " + shallow + " \"!\""), nullptr);
  EXPECT_TRUE(ok.accept_text(std::string(100, 'x') + "yxy!") && ok.is_finished());
  EXPECT_FALSE(ok.hit_bound());
  // The fuzz finding itself (its grammar; 52 stacked `+`): one repetition, matched in full.
  auto found = parse_ok("root ::= (\"ab\" | \"\xC3\xA9\")+ x? [^%dz]{2,3}\nx ::= \"x\" | ." + std::string(52, '+') +
                        ".....*.*\n");
  ASSERT_TRUE(found);
  GrammarMatcher fm(found, nullptr);
  EXPECT_TRUE(fm.accept_text("ab\xC3\xA9" "123456789" "qq") && fm.is_complete());
  EXPECT_FALSE(fm.hit_bound());
}

TEST(grammar_mask, TenThousandAlternatives) {
  std::string gbnf = "root ::= \"w0\"";
  for (int i = 1; i < 10000; ++i) gbnf += " | \"w" + std::to_string(i) + "\"";
  auto g = parse_ok(gbnf);
  ASSERT_TRUE(g);
  GrammarMatcher m(g, nullptr);
  EXPECT_TRUE(m.accept_text("w1234") && m.is_finished());
  GrammarMatcher m2(g, nullptr);
  EXPECT_TRUE(m2.accept_text("w12") && m2.is_complete() && !m2.is_finished());
  EXPECT_FALSE(m2.accept_text("345"));
  EXPECT_FALSE(GrammarMatcher(g, nullptr).accept_text("w10000"));
}

TEST(grammar_mask, DeeplyNestedInputIsRefusedNotACrash) {
  auto g = parse_ok("root ::= \"[\" root \"]\" | \"\"");
  GrammarMatcher m(g, nullptr);
  const std::string deep(60000, '[');
  EXPECT_FALSE(m.accept_text(deep));  // past the stack depth bound
  // Bracket by bracket: refused at the bound, accepted up to it.
  int accepted = 0;
  while (accepted < 60000 && m.accept_text("[")) ++accepted;
  EXPECT_GT(accepted, 1000);
  EXPECT_LT(accepted, 60000);
  GrammarMatcher ok(g, nullptr);
  EXPECT_TRUE(ok.accept_text(std::string(1000, '[') + std::string(1000, ']')) && ok.is_complete());
}

// --- the real vocabulary ------------------------------------------------------------------

constexpr const char* kJsonGrammar = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]*
)";

TEST(grammar_mask, RealVocabularyMaskEqualsPerTokenWalks) {
  const fs::path model = fs::path(pllm::test::kSourceDir) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "model file absent: " << model;
  auto file = GgufFile::open(model.string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tok = Tokenizer::from_gguf(*file.value());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  auto vocab = TokenVocab::build(*tok.value());
  auto g = parse_ok(kJsonGrammar);
  ASSERT_TRUE(g);
  const std::string doc = "{\"name\": \"Zo\xC3\xAB \\\"Z\\u00e9\\\" \xE2\x82\xAC\", \"n\": [1, -2.5e3, true, null],\n \"o\": {}}";
  auto ids = tok.value()->encode(doc, false, false);
  ASSERT_TRUE(ids.ok());
  GrammarMatcher m(g, vocab);
  size_t checked = 0;
  for (size_t step = 0; step <= ids.value().size(); ++step) {
    if (step % 3 == 0 || step == ids.value().size()) {  // every third state, and the end
      const std::vector<uint8_t> mask = mask_of(m, *vocab);
      size_t n_allowed = 0;
      for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
        bool want = false;
        if (vocab->is_end_of_generation(id)) {
          want = m.is_complete();
        } else if (!vocab->piece(id).empty()) {
          want = m.accepts(id);  // a byte walk of this token alone, not the trie
          if (id % 97 == 0) {    // and, for a sample, a copy fed the raw text
            GrammarMatcher copy = m.clone();
            EXPECT_EQ(copy.accept_text(vocab->piece(id)), want) << "step " << step << " token " << id;
          }
        }
        ASSERT_EQ(mask[static_cast<size_t>(id)], want ? 1 : 0) << "step " << step << " token " << id;
        n_allowed += want;
      }
      EXPECT_GT(n_allowed, 0u) << "step " << step;
      ++checked;
    }
    if (step < ids.value().size()) {
      ASSERT_TRUE(m.accepts(ids.value()[step])) << "step " << step;
      ASSERT_TRUE(m.accept(ids.value()[step]).ok());
    }
  }
  EXPECT_TRUE(m.is_finished());
  EXPECT_GE(checked, 10u);
}

}  // namespace
