// Tokenizer tests: llama.cpp test-tokenizer-0 vectors (shared testdata), round trips,
// streaming decode, SmolLM2 specials, and hand-built vocabularies for merge order,
// scores, byte fallback and special-token partitioning.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using namespace pllm;

namespace {

const fs::path kTokData = fs::path(pllm::test::kSharedTestdata) / "tokenizer";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Same splitting as llama.cpp's tests/test-tokenizer-0.cpp: texts separated by
// "\n__ggml_vocab_test__\n"; one line of ids per text in the .out file.
struct Case {
  std::string text;
  std::vector<TokenId> ids;
};
std::vector<Case> read_cases(const fs::path& vocab) {
  const std::string raw = read_file(vocab.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(vocab.string() + ".out");
  std::vector<Case> cases;
  std::string line;
  size_t i = 0;
  while (std::getline(out, line)) {
    Case c;
    if (i < texts.size()) c.text = texts[i];
    std::istringstream ls(line);
    int v;
    while (ls >> v) c.ids.push_back(v);
    cases.push_back(std::move(c));
    ++i;
  }
  EXPECT_EQ(texts.size(), cases.size()) << "input/output test counts differ for " << vocab;
  return cases;
}

// Independent strict UTF-8 validator for the checks below.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::unique_ptr<Tokenizer> load(const fs::path& p) {
  auto f = GgufFile::open(p.string());
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
  if (!f.ok()) return nullptr;
  auto t = Tokenizer::from_gguf(**f);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  if (!t.ok()) return nullptr;
  return std::move(t).value();
}

std::string join_ids(const std::vector<TokenId>& v) {
  std::string s;
  for (auto id : v) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, MatchesLlamaCppExactly) {
  if (GetParam() == "none") GTEST_SKIP() << "no ggml-vocab-*.gguf in " << kTokData;
  const fs::path vocab = kTokData / GetParam();
  if (!fs::exists(vocab.string() + ".inp") || !fs::exists(vocab.string() + ".out"))
    GTEST_SKIP() << "no .inp/.out next to " << vocab;
  auto tok = load(vocab);
  ASSERT_TRUE(tok);
  const auto cases = read_cases(vocab);
  ASSERT_FALSE(cases.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    auto r = tok->encode(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(*r, cases[i].ids) << "first mismatch: text #" << i << " '" << cases[i].text
                                << "'\n expected:" << join_ids(cases[i].ids)
                                << "\n got:     " << join_ids(*r);
  }
}

TEST_P(VocabVectors, DecodeRoundTripAndStreaming) {
  if (GetParam() == "none") GTEST_SKIP() << "no ggml-vocab-*.gguf in " << kTokData;
  const fs::path vocab = kTokData / GetParam();
  if (!fs::exists(vocab.string() + ".inp")) GTEST_SKIP() << "no .inp next to " << vocab;
  auto tok = load(vocab);
  ASSERT_TRUE(tok);
  auto* vt = dynamic_cast<VocabTokenizer*>(tok.get());
  ASSERT_TRUE(vt);
  for (const auto& c : read_cases(vocab)) {
    const std::vector<TokenId> ids = tok->encode(c.text, false, false).value();
    const std::string dec = tok->decode(ids);
    // SentencePiece adds the "▁" prefix, which decodes to a leading space.
    const std::string want = (vt->is_spm() && vt->add_space_prefix() && !c.text.empty())
                                 ? " " + c.text : c.text;
    EXPECT_EQ(dec, want) << "round trip of '" << c.text << "'";
    StreamDecoder sd(*tok);
    std::string acc;
    for (const TokenId id : ids) {
      const std::string piece = sd.push(id);
      EXPECT_TRUE(valid_utf8(piece)) << "stream piece is not valid UTF-8 for '" << c.text << "'";
      acc += piece;
    }
    acc += sd.flush();
    EXPECT_EQ(acc, dec);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedTestdata, VocabVectors, ::testing::ValuesIn(pllm::test::tokenizer_vocab_files()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// ---- SmolLM2 (real model) --------------------------------------------------------------

fs::path smollm_path() {
  const char* name = "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (const char* env = std::getenv("POCKETLLM_MODELS")) {
    const fs::path p = fs::path(env) / name;
    if (fs::exists(p)) return p;
  }
  const fs::path p = fs::path(pllm::test::kSourceDir) / "models" / name;
  return fs::exists(p) ? p : fs::path();
}

class SmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path p = smollm_path();
    if (p.empty())
      GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found ($POCKETLLM_MODELS or models/)";
    tok = load(p);
    ASSERT_TRUE(tok);
  }
  std::unique_ptr<Tokenizer> tok;
};

TEST_F(SmolLM2, VocabAndSpecialIds) {
  EXPECT_EQ(tok->n_vocab(), 49152);
  EXPECT_EQ(tok->bos(), 1);  // tokenizer.ggml.bos_token_id
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->find_token("<|im_start|>"), 1);
  EXPECT_EQ(tok->find_token("<|im_end|>"), 2);
  EXPECT_EQ(tok->find_token("<|endoftext|>"), 0);
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_TRUE(tok->is_end_of_generation(0));
  EXPECT_FALSE(tok->is_end_of_generation(1));
  EXPECT_FALSE(tok->is_end_of_generation(tok->find_token("Hi")));
  // add_bos_token is false in the file: add_special adds nothing.
  EXPECT_EQ(tok->encode("Hi", true, false).value(), std::vector<TokenId>{tok->find_token("Hi")});
}

TEST_F(SmolLM2, ParseSpecial) {
  const std::string text = "<|im_start|>user\nHi<|im_end|>";
  const TokenId user = tok->find_token("user"), nl = tok->find_token("\xC4\x8A");  // "Ċ" = '\n'
  const TokenId hi = tok->find_token("Hi");
  ASSERT_GE(user, 0);
  ASSERT_GE(nl, 0);
  ASSERT_GE(hi, 0);
  EXPECT_EQ(tok->encode(text, false, true).value(), (std::vector<TokenId>{1, user, nl, hi, 2}));
  // Without parse_special the markers are plain text.
  const auto plain = tok->encode(text, false, false).value();
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(tok->decode(plain), text);
  // Control tokens render only on request.
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<|im_start|>");
  EXPECT_EQ(tok->decode(tok->encode(text, false, true).value(), true), text);
}

TEST_F(SmolLM2, DigitsSplitIndividually) {
  // smollm pre-tokenizer isolates every digit (\p{N} first).
  const auto ids = tok->encode("2024", false, false).value();
  ASSERT_EQ(ids.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(ids[i], tok->find_token(std::string(1, "2024"[i])));
}

TEST_F(SmolLM2, RoundTripAndSpeed) {
  std::vector<std::string> texts;
  const fs::path inp = kTokData / "ggml-vocab-gpt-2.gguf";
  if (fs::exists(inp.string() + ".inp"))
    for (auto& c : read_cases(inp)) texts.push_back(c.text);
  texts.push_back("Hello, y'all! How are you 😁 ?我想在apple工作1314151天～\n\n\t  x");
  std::string big;
  for (int i = 0; i < 300; ++i)
    for (const auto& t : texts) big += t;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& t : texts) {
    const auto ids = tok->encode(t, false, false).value();
    EXPECT_EQ(tok->decode(ids), t);
  }
  const auto ids = tok->encode(big, false, false).value();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok->decode(ids), big);
  std::printf("SmolLM2: %zu bytes -> %zu tokens in %.1f ms\n", big.size(), ids.size(), ms);
  EXPECT_LT(ms, 3000.0) << "tokenization is far too slow";
}

TEST_F(SmolLM2, LongRunsStayLinear) {
  // Long whitespace / letter / digit runs: regex backtracking and merging must neither
  // fail nor go quadratic, and the text must survive the round trip.
  for (const std::string& s : {std::string(200000, ' ') + "a", std::string(200000, 'a'),
                               std::string(100000, '7') + "\n" + std::string(50000, '\n'),
                               std::string(60000, '\xE4') /* invalid UTF-8 */}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(s, false, false).value();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 3000.0);
    const std::string dec = tok->decode(ids);
    if (s[0] == '\xE4') {
      EXPECT_EQ(dec.size(), 3 * s.size());  // each invalid byte became U+FFFD
    } else {
      EXPECT_EQ(dec, s);
    }
  }
}

// ---- hand-built vocabularies -------------------------------------------------------------

std::unique_ptr<VocabTokenizer> make(VocabData d) {
  auto r = VocabTokenizer::create(std::move(d));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : nullptr;
}

VocabData tiny_bpe(std::vector<std::string> merges) {
  VocabData d;
  d.model = "gpt2";
  d.pre = "gpt-2";
  d.tokens = {"a", "b", "c", "ab", "bc", "abc", "\xC4\xA0", "\xC4\xA0" "a", "<|ctl|>", "<u>", "aa"};
  d.types = {1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 1};
  d.merges = std::move(merges);
  return d;
}

TEST(HandBpe, MergeOrderFollowsRank) {
  auto t1 = make(tiny_bpe({"a b", "b c"}));
  auto t2 = make(tiny_bpe({"b c", "a b"}));
  auto t3 = make(tiny_bpe({"b c", "a bc"}));
  ASSERT_TRUE(t1 && t2 && t3);
  EXPECT_EQ(t1->encode("abc", false, false).value(), (std::vector<TokenId>{3, 2}));  // ab c
  EXPECT_EQ(t2->encode("abc", false, false).value(), (std::vector<TokenId>{0, 4}));  // a bc
  EXPECT_EQ(t3->encode("abc", false, false).value(), (std::vector<TokenId>{5}));     // abc
}

TEST(HandBpe, TiesGoLeftAndSpaceIsMapped) {
  auto t = make(tiny_bpe({"a a", "\xC4\xA0 a"}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("aaa", false, false).value(), (std::vector<TokenId>{10, 0}));  // aa a
  EXPECT_EQ(t->encode("b a", false, false).value(), (std::vector<TokenId>{1, 7}));   // b Ġa
  EXPECT_EQ(t->decode(std::vector<TokenId>{1, 7}), "b a");
}

TEST(HandBpe, SpecialPartition) {
  auto t = make(tiny_bpe({"a b"}));
  ASSERT_TRUE(t);
  // Control tokens only with parse_special; user-defined tokens always.
  EXPECT_EQ(t->encode("ab<|ctl|>ab", false, true).value(), (std::vector<TokenId>{3, 8, 3}));
  EXPECT_EQ(t->encode("ab<u>ab", false, false).value(), (std::vector<TokenId>{3, 9, 3}));
  const auto plain = t->encode("<|ctl|>", false, false).value();
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 8), 0);
  EXPECT_EQ(t->token_to_piece(8), "");
  EXPECT_EQ(t->token_to_piece(8, true), "<|ctl|>");
  EXPECT_EQ(t->token_to_piece(9), "<u>");
}

TEST(HandBpe, LongestSpecialWins) {
  VocabData d = tiny_bpe({"a b"});
  d.tokens.push_back("<|ctl|>a");
  d.types.push_back(3);
  auto t = make(d);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<|ctl|>ab", false, true).value(), (std::vector<TokenId>{11, 1}));
}

TEST(HandBpe, UnknownTokenTypeIsTolerated) {
  VocabData d = tiny_bpe({"a b"});
  d.types[2] = 42;  // not a known GGUF token type
  auto t = make(d);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("ab", false, false).value(), (std::vector<TokenId>{3}));
  EXPECT_EQ(t->token_to_piece(2), "");  // suppressed like llama.cpp
}

VocabData tiny_spm() {
  VocabData d;
  d.model = "llama";
  d.tokens = {"<unk>", "<s>", "</s>"};
  d.types = {2, 3, 3};
  d.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    d.tokens.push_back(buf);
    d.types.push_back(6);
    d.scores.push_back(0);
  }
  // 259.. : normal pieces
  for (const auto& [s, sc] : std::vector<std::pair<std::string, float>>{
           {"\xE2\x96\x81", -1}, {"h", -2}, {"i", -3}, {"\xE2\x96\x81h", -4},
           {"\xE2\x96\x81hi", -5}, {"a", -6}, {"b", -7}, {"c", -8}, {"ab", -10}, {"bc", -9}}) {
    d.tokens.push_back(s);
    d.types.push_back(1);
    d.scores.push_back(sc);
  }
  return d;
}

TEST(HandSpm, ByteFallbackAndSpacePrefix) {
  auto t = make(tiny_spm());
  ASSERT_TRUE(t);
  // "hi é" -> "▁hi▁é"; é (C3 A9) is not a piece -> byte tokens.
  EXPECT_EQ(t->encode("hi \xC3\xA9", false, false).value(),
            (std::vector<TokenId>{263, 259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->encode("hi", true, false).value(), (std::vector<TokenId>{1, 263}));  // add_bos default
  EXPECT_EQ(t->decode(std::vector<TokenId>{263, 259, 3 + 0xC3, 3 + 0xA9}), " hi \xC3\xA9");
  StreamDecoder sd(*t);
  EXPECT_EQ(sd.push(259), " ");
  EXPECT_EQ(sd.push(3 + 0xC3), "");  // half a character is held back
  EXPECT_EQ(sd.push(3 + 0xA9), "\xC3\xA9");
  EXPECT_EQ(sd.push(3 + 0xE2), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");  // dangling lead byte -> U+FFFD
  EXPECT_EQ(sd.push(3 + 0xFF), "\xEF\xBF\xBD");  // never-valid byte is replaced at once
}

TEST(HandSpm, HigherScoreMergesFirst) {
  VocabData d = tiny_spm();
  d.add_space_prefix = false;
  auto t = make(d);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("abc", false, false).value(), (std::vector<TokenId>{264, 268}));  // a bc
  d = tiny_spm();
  d.add_space_prefix = false;
  d.scores[267] = -8.5f;  // "ab" now beats "bc"
  auto t2 = make(d);
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->encode("abc", false, false).value(), (std::vector<TokenId>{267, 266}));  // ab c
}

TEST(HandVocab, RejectsUnknownModelAndPre) {
  VocabData d = tiny_bpe({});
  d.pre = "no-such-pre";
  EXPECT_FALSE(VocabTokenizer::create(d).ok());
  d = tiny_bpe({});
  d.model = "t5x";
  EXPECT_FALSE(VocabTokenizer::create(d).ok());
}

TEST(HandVocab, EveryPreTokenizerCompiles) {
  for (const char* pre : {"default", "gpt-2", "llama-bpe", "qwen2", "smollm", "starcoder",
                          "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "bloom",
                          "viking", "chatglm-bpe", "tekken", "gpt-4o", "olmo", "command-r"}) {
    VocabData d = tiny_bpe({"a b"});
    d.pre = pre;
    auto r = VocabTokenizer::create(d);
    EXPECT_TRUE(r.ok()) << pre << ": " << (r.ok() ? "" : r.error().message);
  }
}

std::vector<std::string> split_with(PreType t, const std::string& text) {
  auto s = RegexSplitter::create(pre_regexes(t));
  EXPECT_TRUE(s.ok());
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t len : (*s)->split(text)) {
    out.push_back(text.substr(pos, len));
    pos += len;
  }
  EXPECT_EQ(pos, text.size());
  return out;
}

TEST(PreTokenizer, Llama3RegexSemantics) {
  // Worked by hand from the Llama 3 pattern: digits in runs of at most 3, a lone space
  // before digits, whitespace ending in newlines kept together, (?i) contractions.
  EXPECT_EQ(split_with(PreType::llama3, "Hello world  123456 \n\n x"),
            (std::vector<std::string>{"Hello", " world", " ", " ", "123", "456", " \n\n", " x"}));
  EXPECT_EQ(split_with(PreType::llama3, "WE'RE here"),
            (std::vector<std::string>{"WE", "'RE", " here"}));
}

TEST(PreTokenizer, Gpt2AndStarcoderSemantics) {
  EXPECT_EQ(split_with(PreType::gpt2, "a\nb  c's 42!?"),
            (std::vector<std::string>{"a", "\n", "b", " ", " c", "'s", " 42", "!?"}));
  // starcoder/smollm: every digit alone first, then the GPT-2 pattern inside chunks.
  EXPECT_EQ(split_with(PreType::starcoder, "x 42"),
            (std::vector<std::string>{"x", " ", "4", "2"}));
  // Non-ASCII whitespace (U+3000) counts as \s, as in llama.cpp.
  // The first one is followed by whitespace (\s+(?!\S)); the second one, followed by a
  // letter, matches no alternative (" ?" is a literal space) and stays a chunk alone.
  EXPECT_EQ(split_with(PreType::gpt2, "a\xE3\x80\x80\xE3\x80\x80" "b"),
            (std::vector<std::string>{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
}

TEST(Utf8, SanitizeAndCompletePrefix) {
  EXPECT_EQ(sanitize_utf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x96"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x96\x81"), 5u);
  EXPECT_EQ(utf8_complete_prefix("\xC0"), 1u);  // never valid: counts as complete
}

}  // namespace
