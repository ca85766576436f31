// Compensated pruning of one linear layer (quantizer/prune_compensate.h), on Eigen.
#include "quantizer/prune_compensate.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "gguf/gguf_writer.h"
#include "model/weights.h"
#include "quant/types.h"

namespace pllm {
namespace {

using Mat = Eigen::MatrixXd;
using RowMatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr int kChannelBatch = 8;  // FFN channels removed per OBS step
constexpr uint32_t kGramVersion = 1;

// FLAP's ranking: a channel's output fluctuation ||W[:,j]||²·Var(x_j), summed per group;
// the `n_remove` lowest go (ties: the lower index goes first), in that order.
std::vector<int> fluctuation_order(const Mat& Wc, const Mat& C, int width, int n_groups) {
  std::vector<double> score(static_cast<size_t>(n_groups), 0.0);
  for (int g = 0; g < n_groups; ++g)
    for (int j = g * width; j < (g + 1) * width; ++j) score[size_t(g)] += Wc.col(j).squaredNorm() * C(j, j);
  std::vector<int> order(static_cast<size_t>(n_groups));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[size_t(a)] < score[size_t(b)]; });
  return order;
}

// Bias mode: remove the lowest-fluctuation groups, b += W_R·mean(x_R). The error of a set R is
// tr(W_R C_RR W_Rᵀ) (C the covariance), grown one group at a time through U = W_R C_R,:.
void bias_only(const Mat& Wc, const GramMatrix& G, const CompensateSpec& s, std::vector<bool>& removed,
               CompensateResult& out, Eigen::VectorXd& bias) {
  const int n = G.n, rows = int(Wc.rows());
  const double T = double(G.count);
  Eigen::VectorXd mean(n);
  for (int j = 0; j < n; ++j) mean(j) = G.at(n, j) / T;
  Mat C(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) C(i, j) = G.at(i, j) / T - mean(i) * mean(j);
  const std::vector<int> order = fluctuation_order(Wc, C, s.width, n / s.width);
  Mat U = Mat::Zero(rows, n);
  double err = 0.0;
  for (int k = 0; k < s.n_remove; ++k) {
    const int j0 = order[size_t(k)] * s.width, w = s.width;
    const Mat WS = Wc.middleCols(j0, w);
    const Mat WSC = WS * C.block(j0, j0, w, w);
    err += (WS.array() * (2.0 * U.middleCols(j0, w) + WSC).array()).sum();
    U.noalias() += WS * C.middleRows(j0, w);
    out.error.push_back(std::max(err, 0.0));
    bias += WS * mean.segment(j0, w);
    for (int g = 0; g < w; ++g) removed[size_t(j0 + g)] = true;
  }
}

// lsq / lsq_bias: greedy Optimal Brain Surgeon over the input Hessian, m = n (+1 constant).
Result<void> obs_greedy(Mat& Wc, const GramMatrix& G, const CompensateSpec& s, int m, std::vector<bool>& removed,
                        CompensateResult& out) {
  const int n = G.n, w = s.width, n_groups = n / w;
  const double T = double(G.count);
  Mat H(m, m);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) H(i, j) = G.at(i, j) / T;
  double mean_diag = 0.0;
  for (int j = 0; j < n; ++j) mean_diag += H(j, j);
  mean_diag /= double(n);
  if (!(mean_diag > 0.0) || !std::isfinite(mean_diag))
    return make_error(Status::invalid_argument, "the calibration activations of this layer are all zero or not "
                                                "finite: nothing to fit the compensation on");
  H.diagonal().array() += s.ridge * mean_diag;
  // The per-channel shrinkage (prune_compensate.h): s · Var(x_j), Var from the channel sums
  // in G's last row (clamped: rounding can make a constant channel's slightly negative).
  const double shrink = s.shrink * double(n) / T;
  for (int j = 0; j < n; ++j) {
    const double mean = G.at(n, j) / T;
    H(j, j) += shrink * std::max(G.at(j, j) / T - mean * mean, 0.0);
  }
  // A pivot that is rounding noise means the data do not determine the fit (fewer tokens
  // than channels, or channels that are exact combinations of others) and the ridge is
  // too small to stand in for them.
  Eigen::LLT<Mat> llt(H);
  const double min_pivot = llt.info() == Eigen::Success ? llt.matrixLLT().diagonal().array().square().minCoeff() : 0.0;
  if (llt.info() != Eigen::Success || !(min_pivot > 1e-13 * mean_diag))
    return make_error(Status::invalid_argument, "the calibration Gram matrix is singular even with the ridge "
                                                "(raise --ridge or calibrate on more text)");
  Mat Hinv = llt.solve(Mat::Identity(m, m));
  // Single channels (FFN) go in small batches: the lowest saliencies of the step together
  // (the joint update below is exact for the batch; only the choice ignores their
  // interaction), so the updates are rank-`batch` products instead of hundreds of rank-1
  // ones. KV groups are few and wide: one per step.
  const int batch = w == 1 ? kChannelBatch : 1;
  double err = 0.0;
  int done = 0;
  std::vector<std::pair<double, int>> sal;
  while (done < s.n_remove) {
    sal.clear();
    for (int g = 0; g < n_groups; ++g) {
      const int j0 = g * w;
      if (removed[size_t(j0)]) continue;
      double v;
      if (w == 1) {
        v = Wc.col(j0).squaredNorm() / Hinv(j0, j0);
      } else {
        Eigen::LLT<Mat> ls(Hinv.block(j0, j0, w, w));
        v = ls.matrixL().solve(Wc.middleCols(j0, w).transpose()).squaredNorm();
      }
      if (!std::isfinite(v)) return make_error(Status::internal, "compensation: non-finite saliency");
      sal.emplace_back(v, g);
    }
    const int want = std::min(batch, s.n_remove - done);
    const int sorted = std::min<int>(int(sal.size()), want + 1);
    std::partial_sort(sal.begin(), sal.begin() + sorted, sal.end());  // ties: the lower index first
    // A candidate joins the batch only while its saliency given the ones already taken is
    // still no more than the next candidate's: two channels that each explain the other
    // (both cheap alone) must not go together.
    std::vector<int> S;
    for (int j = sal[0].second * w; j < (sal[0].second + 1) * w; ++j) S.push_back(j);
    int take = 1;
    for (; take < want && w == 1; ++take) {
      const int j = sal[size_t(take)].second;
      const Eigen::LLT<Mat> ls(Hinv(S, S));
      const Eigen::VectorXd hSj = Hinv(S, j);
      const double hjj = Hinv(j, j) - hSj.dot(ls.solve(hSj));
      const Eigen::VectorXd wj = Wc.col(j) - Wc(Eigen::all, S) * ls.solve(hSj);
      const double next = take + 1 < int(sal.size()) ? sal[size_t(take + 1)].first : HUGE_VAL;
      if (!(hjj > 0.0) || wj.squaredNorm() / hjj > next) break;
      S.push_back(j);
    }
    // Joint OBS step for S: Z = (H⁻¹)_SS⁻¹ (H⁻¹)_S,: ; the error grows by tr(W_S (H⁻¹)_SS⁻¹ W_Sᵀ).
    const Eigen::LLT<Mat> lss(Hinv(S, S));
    const Mat WS = Wc(Eigen::all, S);
    const Mat Z = lss.solve(Hinv(S, Eigen::all));
    const double step_err = (WS.transpose().array() * lss.solve(WS.transpose()).array()).sum();
    Wc.noalias() -= WS * Z;
    const Mat HS = Hinv(Eigen::all, S);
    Hinv.noalias() -= HS * Z;
    for (int j : S) Wc.col(j).setZero(), removed[size_t(j)] = true;
    // The curve per removed group: the batch's exact growth shared out by the single saliencies.
    double sal_sum = 0.0, part = 0.0;
    for (int i = 0; i < take; ++i) sal_sum += sal[size_t(i)].first;
    for (int i = 0; i < take; ++i) {
      part += sal[size_t(i)].first;
      out.error.push_back(err + (sal_sum > 0.0 ? step_err * part / sal_sum : step_err * (i + 1) / take));
    }
    err += step_err;
    done += take;
  }
  return {};
}

}  // namespace

Result<Compensate> parse_compensate(std::string_view s) {
  if (s == "none") return Compensate::none;
  if (s == "bias") return Compensate::bias;
  if (s == "lsq") return Compensate::lsq;
  if (s == "lsq-bias") return Compensate::lsq_bias;
  return make_error(Status::invalid_argument,
                    "unknown compensation '" + std::string(s) + "': give none, bias, lsq or lsq-bias");
}

const char* compensate_name(Compensate c) {
  switch (c) {
    case Compensate::none: return "none";
    case Compensate::bias: return "bias";
    case Compensate::lsq: return "lsq";
    case Compensate::lsq_bias: return "lsq-bias";
  }
  return "?";
}

GramStats::GramStats(std::vector<std::string> weights)
    : names_(std::move(weights)), grams_(names_.size()), pending_(names_.size()) {}

uint64_t GramStats::bytes_for(std::span<const int64_t> cols) {
  uint64_t b = 0;
  for (int64_t c : cols) b += uint64_t(c + 1) * uint64_t(c + 1) * sizeof(double);
  return b;
}

void GramStats::observe(const Matrix& W, const float* X, int n_tok) {
  const auto it = std::find(names_.begin(), names_.end(), W.name);
  if (it == names_.end() || n_tok <= 0) return;
  const size_t i = size_t(it - names_.begin());
  GramMatrix& G = grams_[i];
  Pending& P = pending_[i];
  const int n = int(W.cols);
  if (G.g.empty()) {
    G.n = n;
    G.g.assign(size_t(n + 1) * size_t(n + 1), 0.0);
    P.xtx.assign(size_t(n) * size_t(n), 0.0f);
    P.sums.assign(size_t(n), 0.0);
  }
  if (G.n != n) return;  // a name has one shape in one model
  // XᵀX of up to kFlushTokens tokens in float (the lower triangle, Eigen's blocked rank
  // update), then added to the double matrix: the float sums stay short, and the double pass
  // and the zeroing run once per flush rather than per batch.
  const Eigen::Map<const RowMatF> Xm(X, n_tok, n);
  Eigen::Map<RowMatF> Pm(P.xtx.data(), n, n);
  Pm.selfadjointView<Eigen::Lower>().rankUpdate(Xm.transpose());
  for (int t = 0; t < n_tok; ++t)
    for (int j = 0; j < n; ++j) P.sums[size_t(j)] += double(X[size_t(t) * size_t(n) + size_t(j)]);
  G.count += uint64_t(n_tok);
  finished_ = false;
  if ((P.tokens += n_tok) >= kFlushTokens) flush(i);
}

void GramStats::flush(size_t i) {
  GramMatrix& G = grams_[i];
  Pending& P = pending_[i];
  if (P.tokens == 0) return;
  const int n = G.n;
  const size_t ld = size_t(n + 1);
  for (int r = 0; r < n; ++r) {
    double* row = G.g.data() + size_t(r) * ld;
    const float* src = P.xtx.data() + size_t(r) * size_t(n);
    for (int j = 0; j <= r; ++j) row[j] += double(src[j]);
  }
  double* last = G.g.data() + size_t(n) * ld;
  for (int j = 0; j < n; ++j) last[j] += P.sums[size_t(j)];
  last[n] += double(P.tokens);
  std::fill(P.xtx.begin(), P.xtx.end(), 0.0f);
  std::fill(P.sums.begin(), P.sums.end(), 0.0);
  P.tokens = 0;
}

void GramStats::finish() {
  for (size_t i = 0; i < grams_.size(); ++i) {
    flush(i);
    GramMatrix& G = grams_[i];
    const size_t ld = size_t(G.n + 1);
    for (size_t r = 0; r < ld && !G.g.empty(); ++r)  // mirror the lower triangle
      for (size_t j = 0; j < r; ++j) G.g[j * ld + r] = G.g[r * ld + j];
  }
  finished_ = true;
}

const GramMatrix* GramStats::find(std::string_view weight) const {
  const auto it = std::find(names_.begin(), names_.end(), weight);
  if (it == names_.end() || !finished_) return nullptr;
  const GramMatrix& G = grams_[size_t(it - names_.begin())];
  return G.count > 0 ? &G : nullptr;
}

bool GramStats::short_calibration(uint64_t& tokens, int& channels) const {
  bool found = false;
  double worst = HUGE_VAL;
  for (const GramMatrix& G : grams_) {
    if (G.count == 0) continue;
    const double per_channel = double(G.count) / double(G.n);
    if (per_channel < kShortCalibTokensPerChannel && per_channel < worst)
      worst = per_channel, tokens = G.count, channels = G.n, found = true;
  }
  return found;
}

Result<void> GramStats::save(const std::string& path, uint64_t model_identity) const {
  if (!finished_) return make_error(Status::internal, "GramStats::save before finish()");
  GgufWriter w;
  w.set_string("general.type", "pocketllm.gram");
  w.set_u32("pocketllm.gram.version", kGramVersion);
  w.set_u64("pocketllm.gram.model_identity", model_identity);
  for (size_t i = 0; i < names_.size(); ++i) {
    const GramMatrix& G = grams_[i];
    if (G.count == 0) continue;
    std::vector<uint8_t> hi(G.g.size() * sizeof(float)), lo(G.g.size() * sizeof(float));
    for (size_t k = 0; k < G.g.size(); ++k) {
      const float h = float(G.g[k]), l = float(G.g[k] - double(h));
      std::memcpy(hi.data() + k * sizeof(float), &h, sizeof h);
      std::memcpy(lo.data() + k * sizeof(float), &l, sizeof l);
    }
    PLLM_TRY(w.add_tensor(names_[i] + ".gram_hi", uint32_t(TensorType::F32), {G.g.size()}, std::move(hi)));
    PLLM_TRY(w.add_tensor(names_[i] + ".gram_lo", uint32_t(TensorType::F32), {G.g.size()}, std::move(lo)));
  }
  return w.write(path);
}

Result<std::unique_ptr<GramStats>> GramStats::load(const std::string& path, const GgufFile& model,
                                                   uint64_t model_identity) {
  PLLM_ASSIGN(auto f, GgufFile::open(path));
  auto bad = [&](const std::string& why) { return make_error(Status::bad_format, path + ": " + why); };
  PLLM_ASSIGN(std::string type, f->get_string_or("general.type", ""));
  if (type != "pocketllm.gram") return bad("not a Gram matrix file (general.type is '" + type + "')");
  PLLM_ASSIGN(uint64_t version, f->get_u64("pocketllm.gram.version"));
  if (version != kGramVersion) return bad("Gram file version " + std::to_string(version) + ", this build reads " +
                                          std::to_string(kGramVersion));
  PLLM_ASSIGN(uint64_t identity, f->get_u64("pocketllm.gram.model_identity"));
  if (identity != model_identity)
    return make_error(Status::invalid_argument, path + " was collected on another model, not on " + model.path());
  std::vector<std::string> names;
  for (const TensorInfo& t : f->tensors()) {
    const std::string suffix = ".gram_hi";
    if (t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(t.name.substr(0, t.name.size() - suffix.size()));
    else if (t.name.size() < 8 || t.name.compare(t.name.size() - 8, 8, ".gram_lo") != 0)
      return bad("unexpected tensor '" + t.name + "'");
  }
  if (names.empty()) return bad("holds no Gram matrices");
  auto out = std::make_unique<GramStats>(names);
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorInfo* hi = f->tensor(names[i] + ".gram_hi");
    const TensorInfo* lo = f->tensor(names[i] + ".gram_lo");
    const TensorInfo* w = model.tensor(names[i]);
    if (!lo) return bad("'" + names[i] + "' lacks its gram_lo half");
    if (!w || w->dims.size() != 2) return bad("'" + names[i] + "' is no 2-D weight of " + model.path());
    const uint64_t m = w->dims[0] + 1;
    for (const TensorInfo* t : {hi, lo})
      if (t->type != uint32_t(TensorType::F32) || t->dims.size() != 1 || t->dims[0] != m * m)
        return bad("tensor '" + t->name + "' must hold (" + std::to_string(m - 1) + " + 1)² F32 values");
    GramMatrix& G = out->grams_[i];
    G.n = int(m - 1);
    G.g.resize(size_t(m * m));
    for (size_t k = 0; k < G.g.size(); ++k) {
      float h, l;
      std::memcpy(&h, hi->data + k * sizeof(float), sizeof h);
      std::memcpy(&l, lo->data + k * sizeof(float), sizeof l);
      G.g[k] = double(h) + double(l);
      if (!std::isfinite(G.g[k])) return bad("'" + names[i] + "' holds a non-finite value");
    }
    for (uint64_t r = 0; r < m; ++r) {
      if (G.g[size_t(r * m + r)] < 0.0) return bad("'" + names[i] + "' has a negative diagonal entry");
      for (uint64_t c = 0; c < r; ++c)
        if (G.g[size_t(r * m + c)] != G.g[size_t(c * m + r)]) return bad("'" + names[i] + "' is not symmetric");
    }
    const double count = G.g.back();
    if (!(count >= 1.0) || count != std::floor(count) || count > 9e15)
      return bad("'" + names[i] + "' has no whole positive token count");
    G.count = uint64_t(count);
  }
  out->finished_ = true;
  return out;
}

Result<CompensateResult> compensate_prune(std::span<const double> W, int rows, std::span<const double> bias0,
                                          const GramMatrix& G, const CompensateSpec& s) {
  const int n = G.n;
  if (s.mode == Compensate::none) return make_error(Status::internal, "compensate_prune: mode none");
  if (rows <= 0 || n <= 0 || W.size() != size_t(rows) * size_t(n) || s.width <= 0 || n % s.width != 0 ||
      G.g.size() != size_t(n + 1) * size_t(n + 1) || (!bias0.empty() && bias0.size() != size_t(rows)))
    return make_error(Status::internal, "compensate_prune: inconsistent shapes");
  if (s.n_remove < 0 || s.n_remove >= n / s.width)
    return make_error(Status::internal, "compensate_prune: must keep at least one group");
  if (G.count == 0) return make_error(Status::invalid_argument, "no calibration tokens reached this layer");
  if (!(s.ridge >= 0.0) || !std::isfinite(s.ridge))
    return make_error(Status::invalid_argument, "--ridge must be a finite number >= 0");
  if (!(s.shrink >= 0.0) || !std::isfinite(s.shrink))
    return make_error(Status::invalid_argument, "--shrink must be a finite number >= 0");

  const bool intercept = s.mode == Compensate::lsq_bias;
  const int m = n + (intercept ? 1 : 0);
  Mat Wc(rows, m);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < n; ++j) Wc(r, j) = W[size_t(r) * size_t(n) + size_t(j)];
    if (intercept) Wc(r, n) = bias0.empty() ? 0.0 : bias0[size_t(r)];
  }
  CompensateResult out;
  out.error.push_back(0.0);
  std::vector<bool> removed(size_t(n), false);
  Eigen::VectorXd bias = Eigen::VectorXd::Zero(rows);
  if (!bias0.empty())
    for (int r = 0; r < rows; ++r) bias(r) = bias0[size_t(r)];
  if (s.mode == Compensate::bias) {
    bias_only(Wc, G, s, removed, out, bias);
  } else {
    PLLM_TRY(obs_greedy(Wc, G, s, m, removed, out));
    if (intercept) bias = Wc.col(n);
  }

  for (int g = 0; g < n / s.width; ++g)
    if (!removed[size_t(g * s.width)]) out.keep.push_back(g);
  const size_t kept_cols = out.keep.size() * size_t(s.width);
  out.w.resize(size_t(rows) * kept_cols);
  for (int r = 0; r < rows; ++r) {
    size_t c = 0;
    for (int g : out.keep)
      for (int j = g * s.width; j < (g + 1) * s.width; ++j) out.w[size_t(r) * kept_cols + c++] = Wc(r, j);
  }
  if (compensate_has_bias(s.mode)) out.bias.assign(bias.data(), bias.data() + rows);
  return out;
}

}  // namespace pllm
