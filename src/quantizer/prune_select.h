// The arithmetic of structured pruning, free of any file: importance scores of FFN channels
// and of attention KV groups, how many to keep, and which ones.
//
// Importance of FFN channel j of a layer (its contribution is
// W_down[:, j] · act(W_gate[j, :] · h) · (W_up[j, :] · h), h = rmsnorm(x) ⊙ ffn_norm):
//   from weights only:      ||W_gate[j, :] ⊙ ffn_norm|| · ||W_up[j, :] ⊙ ffn_norm|| · ||W_down[:, j]||
//                           (bounds the contribution for an input of unit RMS before the
//                           norm's scale, which is folded into the rows; no data needed)
//   with activation stats:  ||W_down[:, j]|| · sqrt(mean x_j²), x = the input of ffn_down
//                           (the expected norm of the channel's contribution to the
//                           residual, measured on calibration text)
// The weights-only score is a poor guide on real models: it cannot see that the residual
// stream is far from isotropic (SmolLM2's layer 0 ranks its most active channels last),
// so prefer statistics (--calib / --stats); see `pocketllm prune --help`.
// Importance of KV group g (kv head g and the query heads that share it; its contribution
// is Σ_h W_o[:, cols(h)] · softmax(...) · W_v[rows(g), :] · h, h = rmsnorm(x) ⊙ attn_norm):
//   from weights only:      ||W_v[rows(g), :] ⊙ attn_norm||_F · sqrt(Σ_h ||W_o[:, cols(h)]||²_F)
//   with activation stats:  sqrt(Σ_{c in cols(g)} ||W_o[:, c]||² · mean x_c²), x = the
//                           input of attn_output (the same expected-norm argument)
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace pllm {

// Channels to keep out of n when removing `ratio` (in [0, 1)) of them: n·(1 − ratio)
// rounded to the nearest multiple of `align` (ties keep more), at least `align` and at
// most n. ratio 0, or n < align, keeps all n.
int prune_keep_count(int n, double ratio, int align);

// KV groups to keep out of n_kv when removing `ratio`: n_kv·(1 − ratio) rounded to the
// nearest count k >= 1 for which k·cols_per_group is a multiple of `align` (the row
// length of attn_output then stays whole blocks); ties keep more. Returns n_kv when ratio
// is 0; -1 when no k < n_kv qualifies.
int prune_keep_groups(int n_kv, double ratio, int cols_per_group, int align);

// The k indices with the largest scores, in ascending index order. Ties go to the lower
// index, so the choice is deterministic.
std::vector<int> top_k_ascending(std::span<const double> score, int k);

// Accumulates squared norms of a row-major [rows][cols] matrix fed one row at a time.
struct NormAccumulator {
  std::vector<double> row_sq;  // [rows]: ||row r||²
  std::vector<double> col_sq;  // [cols]: ||column c||²
  NormAccumulator(int64_t rows, int64_t cols) : row_sq(size_t(rows), 0.0), col_sq(size_t(cols), 0.0) {}
  void add_row(int64_t r, const float* x);
};

// Scores (see the top of this file). Norms are squared norms as NormAccumulator keeps them.
std::vector<double> ffn_scores_from_weights(std::span<const double> gate_row_sq, std::span<const double> up_row_sq,
                                            std::span<const double> down_col_sq);
// mean_sq: mean x² of each input column of ffn_down.
std::vector<double> ffn_scores_from_activations(std::span<const double> down_col_sq,
                                                std::span<const double> mean_sq);
// head_dim values per head, `group` query heads per kv head; wv_row_sq has n_kv·head_dim
// entries, wo_col_sq n_kv·group·head_dim (query heads of kv head g are g·group .. g·group+group−1).
std::vector<double> group_scores_from_weights(std::span<const double> wv_row_sq, std::span<const double> wo_col_sq,
                                              int n_kv, int group, int head_dim);
std::vector<double> group_scores_from_activations(std::span<const double> wo_col_sq, std::span<const double> mean_sq,
                                                  int n_kv, int group, int head_dim);

}  // namespace pllm
