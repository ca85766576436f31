// Vocabulary pruning's keep set (quantizer/prune_vocab.h), on the tokenizer alone: text made
// of kept tokens tokenizes exactly as before (ids renumbered), any other text still round-trips
// as before, specials / bytes / ids survive. On the llama.cpp tokenizer vocabularies of the
// shared testdata (byte-level BPE and SentencePiece) and on hand-built ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quantizer/prune_vocab.h"
#include "test_paths.h"
#include "tokenizer/vocab.h"

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

// llama.cpp's test-tokenizer-0 inputs: texts separated by "\n__ggml_vocab_test__\n".
std::vector<std::string> read_texts(const fs::path& vocab) {
  const std::string raw = read_file(vocab.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    texts.push_back(raw.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  return texts;
}

std::unique_ptr<VocabTokenizer> make(const VocabData& d) {
  auto t = VocabTokenizer::create(d);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<TokenId> encode(const VocabTokenizer& t, const std::string& s) {
  auto r = t.encode(s, false, false);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : std::vector<TokenId>{};
}

// Unicode, unseen words, control bytes, invalid UTF-8, special-token text.
const std::vector<std::string> kOtherTexts = {
    "Zebra quixotically vexes jumpy wizards",
    "naïve café — Ærøskøbing, Ελληνικά, русский, 日本語のテキスト, 한국어",
    "emoji 🎉🦙 and math ∑∫√ ≠ ∞",
    "tabs\tand\nnewlines\r\n  and   runs of spaces   ",
    std::string("control \x01\x04\x7f bytes"),
    std::string("invalid \xff\xfe utf8 \xc3"),
    "<|im_start|>not parsed<|im_end|> <s> </s>",
    "1234567890 3.14159 0x7fff_ffff",
};

// Everything a prune must keep true, for texts whose tokens were asked for (`kept`) and any
// others.
void check_pruned(const VocabData& data, const VocabPrune& v, const std::vector<std::string>& kept,
                  const std::vector<std::string>& other) {
  auto orig = make(data);
  auto pruned = make(v.pruned);
  ASSERT_TRUE(orig && pruned);
  const size_t n = v.keep.size();
  ASSERT_EQ(size_t(pruned->n_vocab()), n);
  ASSERT_EQ(v.from_text + v.from_special + v.from_closure, n);
  ASSERT_TRUE(std::is_sorted(v.keep.begin(), v.keep.end()));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(v.new_id[size_t(v.keep[i])], TokenId(i));
    ASSERT_EQ(v.pruned.tokens[i], data.tokens[size_t(v.keep[i])]);
  }
  // Specials and the tokenizer's ids survive, naming the same tokens.
  for (size_t i = 0; i < data.tokens.size(); ++i) {
    if (!data.types.empty() && data.types[i] != int32_t(TokenType::normal)) {
      EXPECT_GE(v.new_id[i], 0) << "special '" << data.tokens[i] << "' dropped";
    }
  }
  for (auto [a, b] : {std::pair{orig->bos(), pruned->bos()}, {orig->eos(), pruned->eos()}, {orig->unk(), pruned->unk()},
                      {orig->eot(), pruned->eot()}, {orig->pad(), pruned->pad()}}) {
    ASSERT_EQ(a < 0, b < 0);
    if (a >= 0) {
      EXPECT_EQ(orig->token_text(a), pruned->token_text(b));
    }
  }
  // Merges: the kept ones in their order, each of kept parts.
  ASSERT_TRUE(std::is_sorted(v.kept_merges.begin(), v.kept_merges.end()));
  std::set<std::string> kept_text(v.pruned.tokens.begin(), v.pruned.tokens.end());
  for (const std::string& m : v.pruned.merges) {
    const size_t sp = m.find(' ', 1);
    ASSERT_NE(sp, std::string::npos);
    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    EXPECT_TRUE(kept_text.count(a) && kept_text.count(b) && kept_text.count(a + b)) << m;
  }

  size_t exact = 0;
  auto check = [&](const std::string& text, bool must_match) {
    const std::vector<TokenId> before = encode(*orig, text), after = encode(*pruned, text);
    bool all_kept = true;
    std::vector<TokenId> remapped;
    for (TokenId id : before) {
      all_kept = all_kept && v.new_id[size_t(id)] >= 0;
      remapped.push_back(v.new_id[size_t(id)]);
    }
    EXPECT_TRUE(all_kept || !must_match) << "a token of a kept text was dropped: '" << text << "'";
    if (all_kept) {  // text of kept tokens: the same tokens, renumbered
      EXPECT_EQ(after, remapped) << "'" << text << "'";
      ++exact;
    }
    for (TokenId id : after) ASSERT_TRUE(id >= 0 && size_t(id) < n);
    EXPECT_EQ(pruned->decode(after, true), orig->decode(before, true)) << "'" << text << "'";
  };
  for (const std::string& t : kept) check(t, true);
  for (const std::string& t : other) check(t, false);
  EXPECT_GE(exact, kept.size());
}

// ---- the llama.cpp vocabularies ------------------------------------------------------------

class PruneVocabFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(PruneVocabFiles, KeptTextExactOtherTextRoundTrips) {
  if (GetParam() == "none") GTEST_SKIP() << "no ggml-vocab-*.gguf in " << kTokData;
  const fs::path path = kTokData / GetParam();
  if (!fs::exists(path.string() + ".inp")) GTEST_SKIP() << "no .inp next to " << path;
  auto f = GgufFile::open(path.string());
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto data = vocab_data_from_gguf(**f);
  ASSERT_TRUE(data.ok()) << data.error().message;
  auto tok = make(*data);
  ASSERT_TRUE(tok);
  // Keep the tokens of every other test text; the rest (and kOtherTexts) are mostly unseen.
  const std::vector<std::string> texts = read_texts(path);
  std::vector<std::string> kept, other = kOtherTexts;
  std::vector<TokenId> wanted;
  for (size_t i = 0; i < texts.size(); ++i) {
    (i % 2 ? other : kept).push_back(texts[i]);
    if (i % 2 == 0)
      for (TokenId id : encode(*tok, texts[i])) wanted.push_back(id);
  }
  auto v = plan_vocab_prune(*data, wanted);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_LT(v->keep.size(), data->tokens.size() / 2) << "hardly anything pruned";
  check_pruned(*data, *v, kept, other);
  // Pieces of kept texts (their own pre-tokens may differ): never worse than a round trip.
  std::vector<std::string> pieces;
  for (const std::string& t : kept)
    for (size_t len : {size_t(3), size_t(7)})
      for (size_t off = 0; off + len <= t.size(); off += 5) pieces.push_back(t.substr(off, len));
  check_pruned(*data, *v, {}, pieces);
}

INSTANTIATE_TEST_SUITE_P(Shared, PruneVocabFiles, ::testing::ValuesIn(pllm::test::tokenizer_vocab_files()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// ---- hand-built vocabularies ---------------------------------------------------------------

// Byte-level BPE: the 256 byte symbols, the ChatML specials, and merges in `pairs` order.
VocabData bpe_vocab(const std::vector<std::pair<std::string, std::string>>& pairs, bool with_bytes = true) {
  VocabData d;
  d.model = "gpt2";
  d.pre = "gpt-2";
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    d.tokens.push_back(s);
    d.types.push_back(int32_t(TokenType::control));
  }
  if (with_bytes)
    for (int b = 0; b < 256; ++b) {
      d.tokens.push_back(byte_to_unicode(uint8_t(b)));
      d.types.push_back(int32_t(TokenType::normal));
    }
  for (const auto& [a, b] : pairs) {
    d.merges.push_back(a + " " + b);
    if (std::find(d.tokens.begin(), d.tokens.end(), a + b) == d.tokens.end()) {
      d.tokens.push_back(a + b);
      d.types.push_back(int32_t(TokenType::normal));
    }
  }
  d.bos = 0, d.eos = 2;
  return d;
}

TokenId id_of(const VocabData& d, const std::string& s) {
  return TokenId(std::find(d.tokens.begin(), d.tokens.end(), s) - d.tokens.begin());
}

TEST(PruneVocab, BpeClosureKeepsTheMergePieces) {
  // "Ġhello" = Ġ + hello = Ġ + (hell + o) = Ġ + ((he + ll) + o); "Ġworld" is not wanted.
  const VocabData d = bpe_vocab({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "hello"}, {"Ġ", "w"},
                                 {"o", "r"}, {"Ġw", "or"}, {"Ġwor", "ld"}, {"l", "d"}});
  auto tok = make(d);
  const std::vector<TokenId> wanted = encode(*tok, " hello");
  ASSERT_EQ(wanted, std::vector<TokenId>{id_of(d, "Ġhello")});
  auto v = plan_vocab_prune(d, wanted);
  ASSERT_TRUE(v.ok()) << v.error().message;
  for (const char* s : {"he", "ll", "hell", "hello", "Ġhello"}) EXPECT_GE(v->new_id[size_t(id_of(d, s))], 0) << s;
  for (const char* s : {"Ġw", "or", "Ġwor", "ld", "Ġworld"}) EXPECT_LT(v->new_id[size_t(id_of(d, s))], 0) << s;
  EXPECT_EQ(v->from_text, 1u);
  EXPECT_EQ(v->from_special, 3u + 256u);  // the specials and every byte symbol
  EXPECT_EQ(v->from_closure, 4u);         // hello, hell, he, ll
  // Merges kept: exactly those building Ġhello, in their order.
  EXPECT_EQ(v->pruned.merges, (std::vector<std::string>{"h e", "l l", "he ll", "hell o", "Ġ hello"}));
  check_pruned(d, *v, {" hello", " hello hello", "hello"}, {" world", "hellow", "Hello, world!", "ünïcödé 🎉"});
}

// SentencePiece: control tokens, <0xXX> byte fallback, pieces with scores.
VocabData spm_vocab(bool with_bytes = true) {
  VocabData d;
  d.model = "llama";
  d.add_space_prefix = true;
  auto add = [&](const std::string& s, TokenType t, float score) {
    d.tokens.push_back(s);
    d.types.push_back(int32_t(t));
    d.scores.push_back(score);
  };
  add("<unk>", TokenType::unknown, 0);
  add("<s>", TokenType::control, 0);
  add("</s>", TokenType::control, 0);
  if (with_bytes) {
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", TokenType::byte, 0);
  }
  // Higher score merges first. "▁abc" can be built as ▁ab + c or ▁ + abc.
  const std::pair<const char*, float> pieces[] = {
      {"▁", -1}, {"a", -2}, {"b", -3}, {"c", -4}, {"x", -5}, {"y", -6}, {"é", -7},
      {"ab", -10}, {"▁ab", -11}, {"abc", -12}, {"▁abc", -13}, {"bc", -14}, {"xy", -15}, {"▁xy", -16}};
  for (const auto& [s, sc] : pieces) add(s, TokenType::normal, sc);
  return d;
}

TEST(PruneVocab, SpmClosureKeepsEverySplit) {
  const VocabData d = spm_vocab();
  auto tok = make(d);
  const std::vector<TokenId> wanted = encode(*tok, "abc");
  ASSERT_EQ(wanted, std::vector<TokenId>{id_of(d, "▁abc")});
  auto v = plan_vocab_prune(d, wanted);
  ASSERT_TRUE(v.ok()) << v.error().message;
  // Every way ▁abc splits into two symbols: ▁ + abc, ▁a (not a token, not one character:
  // impossible) , ▁ab + c; then abc = a + bc = ab + c, ▁ab = ▁ + ab, ab = a + b, bc = b + c.
  for (const char* s : {"▁", "a", "b", "c", "ab", "▁ab", "abc", "bc", "▁abc"})
    EXPECT_GE(v->new_id[size_t(id_of(d, s))], 0) << s;
  for (const char* s : {"x", "y", "xy", "▁xy", "é"}) EXPECT_LT(v->new_id[size_t(id_of(d, s))], 0) << s;
  EXPECT_TRUE(v->kept_merges.empty());
  check_pruned(d, *v, {"abc", "abc abc", "ab abc"}, {"xy", "abcxy é", "ünïcödé 🎉", "<s>"});
}

TEST(PruneVocab, SpecialsNamedIdsAndDefaultsSurvive) {
  VocabData d = bpe_vocab({{"h", "i"}});
  d.bos.reset();  // gpt2's default bos/eos is id 11: that token must stay, and be named
  d.eos.reset();
  d.pad = 1;
  auto tok = make(d);
  ASSERT_EQ(tok->bos(), 11);
  auto v = plan_vocab_prune(d, encode(*tok, "hi"), {id_of(d, "hi")});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->pruned.bos, v->new_id[11]);
  EXPECT_EQ(v->pruned.eos, v->new_id[11]);
  EXPECT_EQ(v->pruned.pad, v->new_id[1]);
  EXPECT_EQ(v->pruned.tokens[size_t(*v->pruned.bos)], d.tokens[11]);
  // A normal token with an end marker's text is special to the tokenizer: kept.
  VocabData e = bpe_vocab({});
  e.tokens.push_back("<end_of_turn>");
  e.types.push_back(int32_t(TokenType::normal));
  auto w = plan_vocab_prune(e, {});
  ASSERT_TRUE(w.ok());
  EXPECT_GE(w->new_id.back(), 0);
}

TEST(PruneVocab, BytesWithoutATokenKeepTheirHolders) {
  // Byte 0x04 has no symbol of its own; "ĄĄ" (two of them) is a token: it must stay, or text
  // with those bytes would lose them where it did not before.
  VocabData d = bpe_vocab({{"a", "b"}});
  const std::string sym = byte_to_unicode(0x04);
  d.tokens.erase(d.tokens.begin() + id_of(d, sym));
  d.types.pop_back();
  d.tokens.push_back(sym + sym);
  d.types.push_back(int32_t(TokenType::normal));
  d.merges.push_back(sym + " " + sym);
  auto v = plan_vocab_prune(d, {});
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(v->bytes_missing, 1);
  EXPECT_GE(v->new_id.back(), 0);
  EXPECT_LT(v->new_id[size_t(id_of(d, "ab"))], 0);
}

TEST(PruneVocab, Errors) {
  VocabData d = bpe_vocab({});
  d.model = "bert";
  auto r = plan_vocab_prune(d, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::unsupported);
  EXPECT_NE(r.error().message.find("bert"), std::string::npos);

  auto no_bytes = plan_vocab_prune(bpe_vocab({}, /*with_bytes=*/false), {});
  ASSERT_FALSE(no_bytes.ok());
  EXPECT_NE(no_bytes.error().message.find("no byte tokens"), std::string::npos);
  auto no_spm_bytes = plan_vocab_prune(spm_vocab(/*with_bytes=*/false), {});
  ASSERT_FALSE(no_spm_bytes.ok());
  EXPECT_NE(no_spm_bytes.error().message.find("<0x00>"), std::string::npos);

  auto range = plan_vocab_prune(bpe_vocab({}), {100000});
  ASSERT_FALSE(range.ok());
}

TEST(PruneVocab, MostFrequent) {
  const std::vector<TokenId> ids = {5, 3, 5, 9, 3, 5, 7, 7, 1};
  EXPECT_EQ(most_frequent_tokens(ids, 1), std::vector<TokenId>{5});
  EXPECT_EQ(most_frequent_tokens(ids, 3), (std::vector<TokenId>{5, 3, 7}));  // 3 and 7 tie: lower id first
  EXPECT_EQ(most_frequent_tokens(ids, 100).size(), 5u);
}

TEST(PruneVocab, ArgumentIsAFileOrACount) {
  auto n = parse_vocab_keep("500");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->top_n, 500);
  EXPECT_TRUE(n->file.empty());
  for (const char* bad : {"0", "-3", "+0"}) EXPECT_FALSE(parse_vocab_keep(bad).ok()) << bad;
  EXPECT_FALSE(parse_vocab_keep("99999999999999999999999").ok());
  auto f = parse_vocab_keep("words.txt");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->file, "words.txt");
  // An existing file wins over the number it looks like.
  const fs::path dir = fs::temp_directory_path() / ("pllm_vocab_arg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path num = dir / "123";
  std::ofstream(num) << "text";
  auto e = parse_vocab_keep(num.string());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->file, num.string());
  const fs::path cwd = fs::current_path();
  fs::current_path(dir);
  auto rel = parse_vocab_keep("123");
  fs::current_path(cwd);
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->file, "123");
  EXPECT_EQ(rel->top_n, 0);
  fs::remove_all(dir);
}

}  // namespace
