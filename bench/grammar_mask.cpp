// Grammar mask benchmark: simulates constrained decoding of a fixed JSON document. The document
// is tokenised with each vocabulary's own tokenizer and fed token by token; at every step it times
// the full mask (GrammarMatcher::allowed over the whole vocabulary) and the lazy check
// (accepts of the true next token). Also the time to first mask: grammar parse + vocabulary
// trie + first mask. One thread.
//
//   build/grammar_mask [--grammar FILE.gbnf] [--doc FILE.json] [--repeat N] [VOCAB.gguf ...]
//
// Default vocabularies (paths from the repository root): SmolLM2 (49k) and Qwen2 (152k).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

using namespace pllm;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kJsonObjectGrammar = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]*
)";

constexpr const char* kDocument = R"({
  "id": "call_7f3a9c",
  "name": "search_flights",
  "arguments": {
    "from": "Zürich",
    "to": "São Paulo",
    "date": "2025-03-14",
    "passengers": [{"name": "Renée Dupont", "age": 34}, {"name": "李小龍", "age": 7}],
    "max_price_eur": 1249.5,
    "flexible": true,
    "notes": "Window seat if possible \u2014 \"no red-eye\" please 🙏"
  },
  "scores": [0.93, -1.5e-3, 42, 0],
  "tags": ["travel", "urgent", null]
})";

std::string read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct Stats {
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  s.p50 = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * 0.99))];
  s.max = v.back();
  return s;
}

int run(const std::string& vocab_path, const std::string& gbnf, const std::string& doc, int repeats) {
  auto file = GgufFile::open(vocab_path);
  if (!file.ok()) {
    std::fprintf(stderr, "%s: %s (skipped)\n", vocab_path.c_str(), file.error().message.c_str());
    return 0;
  }
  auto tok = Tokenizer::from_gguf(*file.value());
  if (!tok.ok()) {
    std::fprintf(stderr, "%s: %s\n", vocab_path.c_str(), tok.error().message.c_str());
    return 1;
  }
  auto ids = tok.value()->encode(doc, false, false);
  if (!ids.ok()) return 1;

  auto t0 = Clock::now();
  auto grammar = parse_gbnf(gbnf);
  if (!grammar.ok()) {
    std::fprintf(stderr, "grammar: %s\n", grammar.error().message.c_str());
    return 1;
  }
  const double parse_us = us_since(t0);
  auto t1 = Clock::now();
  auto vocab = TokenVocab::build(*tok.value());
  const double vocab_us = us_since(t1);
  auto t2 = Clock::now();
  GrammarMatcher m(grammar.value(), vocab);
  std::vector<uint8_t> mask(static_cast<size_t>(vocab->n_vocab()));
  m.allowed(mask);
  const double first_us = us_since(t2);

  // The decode is repeated with a fresh matcher each time (so the same steps miss the mask
  // cache) and each step keeps its fastest time: on a shared machine that removes preemptions.
  const size_t n_tokens = ids.value().size();
  std::vector<double> mask_us(n_tokens, 1e30), accepts_us(n_tokens, 1e30);
  size_t allowed_sum = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    GrammarMatcher fresh(grammar.value(), vocab);
    for (size_t i = 0; i < n_tokens; ++i) {
      const int32_t id = ids.value()[i];
      auto a = Clock::now();
      fresh.allowed(mask);
      mask_us[i] = std::min(mask_us[i], us_since(a));
      auto b = Clock::now();
      const bool ok = fresh.accepts(id);
      accepts_us[i] = std::min(accepts_us[i], us_since(b));
      if (!ok || !mask[static_cast<size_t>(id)] || !fresh.accept(id).ok()) {
        std::fprintf(stderr, "%s: the grammar refused token %zu (%d '%s') of the document\n", vocab_path.c_str(), i,
                     id, std::string(vocab->piece(id)).c_str());
        return 1;
      }
      if (rep == 0)
        for (uint8_t x : mask) allowed_sum += x;
    }
    if (rep == 0) m = std::move(fresh);
  }
  const Stats ms = stats(mask_us), as = stats(accepts_us);
  std::printf("%s: n_vocab %d, %zu document tokens, best of %d runs per step, complete at end: %s\n", vocab_path.c_str(), vocab->n_vocab(),
              ids.value().size(), repeats, m.is_complete() ? "yes" : "NO");
  std::printf("  time to first mask %.0f us = parse %.0f + vocab trie %.0f + first mask %.0f\n",
              parse_us + vocab_us + first_us, parse_us, vocab_us, first_us);
  std::printf("  full mask   us/token: mean %.1f  p50 %.1f  p99 %.1f  max %.1f  (avg %.0f tokens allowed)\n", ms.mean,
              ms.p50, ms.p99, ms.max, static_cast<double>(allowed_sum) / static_cast<double>(ids.value().size()));
  std::printf("  accepts(id) us/token: mean %.2f  p50 %.2f  p99 %.2f  max %.2f\n", as.mean, as.p50, as.p99, as.max);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gbnf = kJsonObjectGrammar, doc = kDocument;
  int repeats = 5;
  std::vector<std::string> vocabs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--grammar" && i + 1 < argc) {
      gbnf = read_file(argv[++i]);
    } else if (arg == "--doc" && i + 1 < argc) {
      doc = read_file(argv[++i]);
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: grammar_mask [--grammar FILE.gbnf] [--doc FILE] [--repeat N] [VOCAB.gguf ...]\n");
      return 2;
    } else {
      vocabs.push_back(arg);
    }
  }
  if (vocabs.empty())
    vocabs = {"models/SmolLM2-135M-Instruct.Q4_1.gguf", "../shared/testdata/tokenizer/ggml-vocab-qwen2-deepseek-r1.gguf"};
  int rc = 0;
  for (const std::string& v : vocabs) rc |= run(v, gbnf, doc, repeats);
  return rc;
}
