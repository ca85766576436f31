// The sampler with a grammar: the drawn token is checked first and kept when the grammar allows
// it (so constrained and free sampling agree wherever the grammar does not object); otherwise
// the refused tokens are masked and the draw repeated. End of generation only where complete.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "constrained/grammar.h"
#include "runtime/sampler.h"

namespace pllm {
namespace {

// A small vocabulary: single characters, a few multi-character pieces, an end token (id 0) and
// a control token with no bytes (id 1).
const std::vector<std::string> kPieces = {"", "", "a", "b", "c", "ab", "ba", "abc", "{", "}", "\"", "x", " "};

GrammarConstraint constraint(std::string_view gbnf) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.error().message;
  return {g.value(), TokenVocab::from_pieces(kPieces, {0})};
}

SamplingConfig greedy() {
  SamplingConfig c;
  c.temperature = 0;
  return c;
}

SamplingConfig hot(uint64_t seed) {
  SamplingConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.seed = seed;
  return c;
}

std::vector<float> random_logits(std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> l(kPieces.size());
  for (float& x : l) x = d(rng);
  return l;
}

TEST(SamplerGrammar, GreedyTakesTheBestAllowedToken) {
  Sampler s(greedy(), int(kPieces.size()), constraint(R"(root ::= "b" "a"+)"));
  std::vector<float> l(kPieces.size(), 0.0f);
  l[2] = 5.0f;  // "a": refused first
  l[5] = 4.0f;  // "ab": refused
  l[3] = 1.0f;  // "b": the best allowed
  EXPECT_EQ(s.sample(l.data(), {}), 3);
  EXPECT_TRUE(std::isinf(l[2]) && l[2] < 0) << "the refused best token is masked";
  std::vector<float> l2(kPieces.size(), 0.0f);
  l2[0] = 9.0f;  // the end: not yet (nothing of "a"+ written)
  l2[6] = 1.0f;  // "ba": refused (b after b)
  l2[2] = 0.5f;
  EXPECT_EQ(s.sample(l2.data(), {}), 2);
  std::vector<float> l3(kPieces.size(), 0.0f);
  l3[0] = 9.0f;  // now complete: the end is allowed
  EXPECT_EQ(s.sample(l3.data(), {}), 0);
}

TEST(SamplerGrammar, AnAllowedDrawIsTheFreeDraw) {
  // Where the grammar allows everything the model likes, the constrained sampler draws exactly
  // what the free sampler draws, seed for seed.
  const GrammarConstraint any = constraint(R"(root ::= [abc]*)");
  std::mt19937 rng(7);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Sampler free(hot(seed), int(kPieces.size()));
    Sampler constrained(hot(seed), int(kPieces.size()), any);
    for (int step = 0; step < 10; ++step) {
      std::vector<float> l = random_logits(rng);
      for (int id : {0, 1, 8, 9, 10, 11, 12}) l[size_t(id)] = -INFINITY;  // the model never wants them
      std::vector<float> l2 = l;
      ASSERT_EQ(free.sample(l.data(), {}), constrained.sample(l2.data(), {})) << "seed " << seed;
    }
  }
}

TEST(SamplerGrammar, EverySampledTextIsInTheGrammar) {
  const GrammarConstraint g = constraint(R"(root ::= "{" ( "\"" [abc]+ "\"" ) "}")");
  std::mt19937 rng(11);
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Sampler s(hot(seed), int(kPieces.size()), g);
    std::string text;
    bool ended = false;
    for (int step = 0; step < 40 && !ended; ++step) {
      std::vector<float> l = random_logits(rng);
      const int32_t id = s.sample(l.data(), {});
      ASSERT_NE(id, Sampler::kNoToken);
      ASSERT_NE(id, 1) << "a control token with no text is never allowed";
      if (id == 0) ended = true;
      else text += kPieces[size_t(id)];
    }
    if (!ended) continue;  // ran out of steps inside the string: fine, but then check the prefix
    auto check = parse_gbnf(R"(root ::= "{" ( "\"" [abc]+ "\"" ) "}")");
    GrammarMatcher m(check.value(), TokenVocab::from_pieces(kPieces, {0}));
    EXPECT_TRUE(m.accept_text(text) && m.is_complete()) << text;
  }
}

TEST(SamplerGrammar, NoAllowedTokenIsReported) {
  // The vocabulary cannot write "z": nothing is allowed at the start.
  Sampler s(greedy(), int(kPieces.size()), constraint(R"(root ::= "z")"));
  std::vector<float> l(kPieces.size(), 1.0f);
  EXPECT_EQ(s.sample(l.data(), {}), Sampler::kNoToken);
}

TEST(SamplerGrammar, RoundingNeverReturnsAMaskedToken) {
  // One allowed token among many refused ones with top-k keeping refused ones: whatever the
  // draw, the allowed token comes back.
  SamplingConfig c = hot(3);
  c.top_k = int(kPieces.size());
  for (uint64_t seed = 0; seed < 200; ++seed) {
    c.seed = seed;
    Sampler s(c, int(kPieces.size()), constraint(R"(root ::= "x")"));
    std::vector<float> l(kPieces.size(), 3.0f);
    ASSERT_EQ(s.sample(l.data(), {}), 11);
  }
}

}  // namespace
}  // namespace pllm
