#include "quantizer/prune_select.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pllm {

int prune_keep_count(int n, double ratio, int align) {
  if (ratio <= 0.0 || align <= 0 || n < align) return n;
  const double target = double(n) * (1.0 - ratio);
  const int64_t blocks = int64_t(std::floor(target / align + 0.5));  // nearest, ties up
  const int64_t most = int64_t(n / align) * align;
  return int(std::clamp<int64_t>(blocks * align, align, most));
}

int prune_keep_groups(int n_kv, double ratio, int cols_per_group, int align) {
  if (ratio <= 0.0) return n_kv;
  const double target = double(n_kv) * (1.0 - ratio);
  int best = -1;
  double best_dist = 0.0;
  for (int k = 1; k < n_kv; ++k) {
    if (align > 0 && (int64_t(k) * cols_per_group) % align != 0) continue;
    const double dist = std::fabs(double(k) - target);
    if (best < 0 || dist < best_dist || (dist == best_dist && k > best)) {
      best = k;
      best_dist = dist;
    }
  }
  // Keeping everything is the nearest choice when the target rounds to n_kv.
  if (best >= 0 && std::fabs(double(n_kv) - target) < best_dist) return n_kv;
  return best;
}

std::vector<int> top_k_ascending(std::span<const double> score, int k) {
  std::vector<int> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::clamp(k, 0, int(idx.size()));
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return score[size_t(a)] > score[size_t(b)]; });
  idx.resize(size_t(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

void NormAccumulator::add_row(int64_t r, const float* x) {
  double s = 0.0;
  for (size_t c = 0; c < col_sq.size(); ++c) {
    const double v = double(x[c]) * double(x[c]);
    s += v;
    col_sq[c] += v;
  }
  row_sq[size_t(r)] = s;
}

std::vector<double> ffn_scores_from_weights(std::span<const double> gate_row_sq, std::span<const double> up_row_sq,
                                            std::span<const double> down_col_sq) {
  std::vector<double> s(down_col_sq.size());
  for (size_t j = 0; j < s.size(); ++j) s[j] = std::sqrt(gate_row_sq[j] * up_row_sq[j] * down_col_sq[j]);
  return s;
}

std::vector<double> ffn_scores_from_activations(std::span<const double> down_col_sq,
                                                std::span<const double> mean_sq) {
  std::vector<double> s(down_col_sq.size());
  for (size_t j = 0; j < s.size(); ++j) s[j] = std::sqrt(down_col_sq[j] * mean_sq[j]);
  return s;
}

std::vector<double> group_scores_from_weights(std::span<const double> wv_row_sq, std::span<const double> wo_col_sq,
                                              int n_kv, int group, int head_dim) {
  std::vector<double> s(size_t(n_kv), 0.0);
  const size_t cols = size_t(group) * head_dim;
  for (int g = 0; g < n_kv; ++g) {
    double v = 0.0, o = 0.0;
    for (int i = 0; i < head_dim; ++i) v += wv_row_sq[size_t(g) * head_dim + i];
    for (size_t c = 0; c < cols; ++c) o += wo_col_sq[size_t(g) * cols + c];
    s[size_t(g)] = std::sqrt(v * o);
  }
  return s;
}

std::vector<double> group_scores_from_activations(std::span<const double> wo_col_sq, std::span<const double> mean_sq,
                                                  int n_kv, int group, int head_dim) {
  std::vector<double> s(size_t(n_kv), 0.0);
  const size_t cols = size_t(group) * head_dim;
  for (int g = 0; g < n_kv; ++g) {
    double o = 0.0;
    for (size_t c = 0; c < cols; ++c) o += wo_col_sq[size_t(g) * cols + c] * mean_sq[size_t(g) * cols + c];
    s[size_t(g)] = std::sqrt(o);
  }
  return s;
}

}  // namespace pllm
