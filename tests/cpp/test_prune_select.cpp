// The pruner's arithmetic (quantizer/prune_select.h): kept counts, their rounding to whole
// blocks, the top-k choice and the importance scores, against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quantizer/prune_select.h"

using namespace pllm;

TEST(PruneKeepCount, RoundsToNearestMultipleOfAlign) {
  // 1536 * 0.65 = 998.4 -> 31.2 blocks of 32 -> 31 -> 992
  EXPECT_EQ(prune_keep_count(1536, 0.35, 32), 992);
  // K-quants: 998.4 / 256 = 3.9 -> 4 blocks -> 1024
  EXPECT_EQ(prune_keep_count(1536, 0.35, 256), 1024);
  // 512 * 0.7 = 358.4 -> 11.2 -> 352; 512 * 0.65 = 332.8 -> 10.4 -> 320
  EXPECT_EQ(prune_keep_count(512, 0.3, 32), 352);
  EXPECT_EQ(prune_keep_count(512, 0.35, 32), 320);
  // a tie (exactly half a block) keeps more: 512 * 0.71875 = 368 -> 11.5 blocks -> 12
  EXPECT_EQ(prune_keep_count(512, 0.28125, 32), 384);
}

TEST(PruneKeepCount, Limits) {
  EXPECT_EQ(prune_keep_count(512, 0.0, 32), 512);   // nothing asked: everything, even unaligned
  EXPECT_EQ(prune_keep_count(500, 0.0, 32), 500);
  EXPECT_EQ(prune_keep_count(512, 0.9, 256), 256);  // never below one block
  EXPECT_EQ(prune_keep_count(16, 0.5, 32), 16);     // fewer channels than a block: unchanged
  EXPECT_EQ(prune_keep_count(500, 0.01, 32), 480);  // at most n rounded down to a block
  EXPECT_EQ(prune_keep_count(512, 0.01, 32), 512);  // 506.9 rounds back to all 16 blocks
}

TEST(PruneKeepGroups, NearestCountWithWholeBlocks) {
  // 3 kv groups of 3 heads x 64 (SmolLM2): 192 columns each
  EXPECT_EQ(prune_keep_groups(3, 0.34, 192, 32), 2);
  EXPECT_EQ(prune_keep_groups(3, 0.5, 192, 32), 2);   // 1.5: a tie keeps more
  EXPECT_EQ(prune_keep_groups(3, 0.7, 192, 32), 1);
  EXPECT_EQ(prune_keep_groups(3, 0.1, 192, 32), 3);   // 2.7 rounds to all three
  EXPECT_EQ(prune_keep_groups(3, 0.0, 192, 32), 3);
  // attn_output in Q4_K (256-element rows): 1 group = 192 columns is not whole blocks,
  // 4 of 8 groups = 512 is
  EXPECT_EQ(prune_keep_groups(2, 0.5, 128, 256), -1);
  EXPECT_EQ(prune_keep_groups(8, 0.4, 128, 256), 4);  // 4.8: 4 (512) beats 6 (768); 5, 7 are not whole
  EXPECT_EQ(prune_keep_groups(8, 0.2, 128, 256), 6);  // 6.4 -> 6
}

TEST(TopK, LargestScoresAscendingIndicesTiesToLowerIndex) {
  const std::vector<double> s = {0.5, 3.0, 1.0, 3.0, 0.0, 2.0};
  EXPECT_EQ(top_k_ascending(s, 3), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(top_k_ascending(s, 1), (std::vector<int>{1}));  // tie 1 vs 3: the lower index
  EXPECT_EQ(top_k_ascending(s, 0), (std::vector<int>{}));
  EXPECT_EQ(top_k_ascending(s, 9), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(NormAccumulator, RowAndColumnSquares) {
  NormAccumulator acc(2, 3);
  const float r0[] = {1, 2, 3}, r1[] = {-4, 0, 1};
  acc.add_row(0, r0);
  acc.add_row(1, r1);
  EXPECT_EQ(acc.row_sq, (std::vector<double>{14, 17}));
  EXPECT_EQ(acc.col_sq, (std::vector<double>{17, 4, 10}));
}

TEST(PruneScores, FfnFromWeightsAndActivations) {
  // norms: gate 2, up 3, down 4 -> 24; a zero row anywhere gives 0
  const std::vector<double> g = {4, 4}, u = {9, 0}, d = {16, 16};
  const auto s = ffn_scores_from_weights(g, u, d);
  EXPECT_DOUBLE_EQ(s[0], 24.0);
  EXPECT_DOUBLE_EQ(s[1], 0.0);
  const std::vector<double> m = {0.25, 4.0};  // mean x^2
  const auto a = ffn_scores_from_activations(d, m);
  EXPECT_DOUBLE_EQ(a[0], 2.0);  // 4 * 0.5
  EXPECT_DOUBLE_EQ(a[1], 8.0);  // 4 * 2
}

TEST(PruneScores, GroupsFromWeightsAndActivations) {
  // 2 kv heads, group 2, head_dim 1: wv rows [1, 4]; wo columns (q heads 0,1 | 2,3)
  const std::vector<double> wv = {1, 4}, wo = {1, 3, 2, 2}, m = {1, 0, 4, 0.25};
  const auto w = group_scores_from_weights(wv, wo, 2, 2, 1);
  EXPECT_DOUBLE_EQ(w[0], 2.0);  // sqrt(1 * (1 + 3))
  EXPECT_DOUBLE_EQ(w[1], 4.0);  // sqrt(4 * (2 + 2))
  const auto a = group_scores_from_activations(wo, m, 2, 2, 1);
  EXPECT_DOUBLE_EQ(a[0], 1.0);                   // sqrt(1*1 + 3*0)
  EXPECT_DOUBLE_EQ(a[1], std::sqrt(8.0 + 0.5));  // sqrt(2*4 + 2*0.25)
}
