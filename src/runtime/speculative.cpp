// The adaptive draft length and the layer-skip calibration of runtime/speculative.h.
#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/session.h"

namespace pllm {
namespace {

// Expected tokens a verify pass of k drafts yields when each draft is kept with probability a
// (given the ones before it were): the kept run plus the token drawn after it.
double tokens_per_pass(double a, int k) {
  double t = 1, run = 1;
  for (int i = 0; i < k; ++i) t += (run *= a);
  return t;
}

// The draft length in [0, max_k] with the most tokens per unit of time, and that rate relative
// to plain decoding (1 token per plain step). row: a verify row's cost beyond the first, draft: a
// drafted token's cost, both in plain steps.
std::pair<int, double> best_length(double a, double row, double draft, int max_k) {
  int best = 0;
  double rate = 1.0;
  for (int k = 1; k <= max_k; ++k) {
    const double r = tokens_per_pass(a, k) / (1.0 + k * (row + draft));
    if (r > rate) rate = r, best = k;
  }
  return {best, rate};
}

constexpr double kDecay = 0.9;  // weight of the past per verify pass
// Plain steps between probes when drafts do not pay: 16, doubled after each probe whose guess
// was not kept (up to 256), back to 16 when one is.
constexpr int kProbeEvery = 16, kProbeEveryMost = 256;
// A probe's measured loss (its drafting and verify pass against the plain steps its tokens would
// have taken) may be at most this share of the plain decoding time since the last probe: a
// draft model that must first catch up with many tokens probes less often than prompt lookup.
constexpr double kProbeShare = 0.05;

}  // namespace

DraftLength::DraftLength(int min_tokens, int max_tokens, bool free_drafts)
    : min_(std::max(0, min_tokens)), max_(std::clamp(max_tokens, 1, kMaxLength)), free_(free_drafts) {}

int DraftLength::next() { return std::clamp(choose(), min_, max_); }

int DraftLength::choose() {
  if (plain_ms_ <= 0) return 0;  // a plain step first: every cost is measured against it
  // A drafter whose guesses cost forward passes: one guess first, so that a long draft is tried
  // only once a guess's cost is known (8 guesses of a layer-skipping draft cost 6 steps).
  if (!free_ && draft_ms_ <= 0) return 1;
  // A pass's cost is not linear in its rows (a few rows ride on the weights' stream for free,
  // more are compute-bound): each length's measured cost, and for one not tried yet, the
  // cheapest extra row seen so far (optimistic, so it gets tried and measured).
  double row = 0.15 * plain_ms_;
  for (int k = 1; k <= max_; ++k)
    if (pass_ms_[size_t(k)] > 0) row = std::min(row, std::max(0.0, pass_ms_[size_t(k)] - plain_ms_) / k);
  int k = 0;
  double best = 1.0, best_if_all_kept = 0.0;  // tokens per plain step's time
  for (int n = 1; n <= max_; ++n) {
    const double pass = pass_ms_[size_t(n)] > 0 ? pass_ms_[size_t(n)] : plain_ms_ + n * row;
    const double cost = pass + (free_ ? 0.0 : n * draft_ms_);
    const double rate = tokens_per_pass(accept_, n) * plain_ms_ / cost;
    if (rate > best) best = rate, k = n;
    best_if_all_kept = std::max(best_if_all_kept, (n + 1) * plain_ms_ / cost);
  }
  if (k > 0) return k;
  // Drafts do not pay now: probe one guess now and then, within the probes' share of the time.
  // Where guesses cost so much that even all of them kept would not pay (a layer-skipping draft
  // of most of a model whose output head is most of a step), a probe can only find the costs
  // changed: rarely.
  const int every = best_if_all_kept <= 1.0 ? kProbeEveryMost : probe_every_;
  if (++since_probe_ >= every && since_probe_ * plain_ms_ * kProbeShare >= probe_loss_ms_) {
    since_probe_ = 0;
    return 1;
  }
  return 0;
}

void DraftLength::record_verify(int drafted, int accepted, double verify_ms, double draft_ms) {
  if (drafted <= 0) return;
  since_probe_ = 0;
  probe_every_ = accepted > 0 ? kProbeEvery : std::min(2 * probe_every_, kProbeEveryMost);
  // Kept runs are geometric in the acceptance: its estimate is kept / (kept + rejections).
  kept_ = kept_ * kDecay + accepted;
  rejected_ = rejected_ * kDecay + (accepted < drafted ? 1 : 0);
  accept_ = kept_ / (kept_ + rejected_);
  if (drafted <= kMaxLength) {
    double& p = pass_ms_[size_t(drafted)];
    p = p > 0 ? p * kDecay + verify_ms * (1 - kDecay) : verify_ms;
  }
  const double d = draft_ms / drafted;
  draft_ms_ = draft_ms_ > 0 ? draft_ms_ * kDecay + d * (1 - kDecay) : d;
  if (drafted == 1) probe_loss_ms_ = std::max(0.0, draft_ms + verify_ms - (1 + accepted) * plain_ms_);
}

void DraftLength::record_plain(double ms) { plain_ms_ = plain_ms_ > 0 ? plain_ms_ * kDecay + ms * (1 - kDecay) : ms; }

// ---- layer-skip calibration ------------------------------------------------------------

namespace {

size_t matrix_bytes(const Matrix& m) { return size_t(m.rows) * m.row_bytes; }

size_t layer_bytes(LayerWeights l) {
  size_t b = 0;
  for (const Matrix* m : l.matrices()) b += m->data ? matrix_bytes(*m) : 0;
  return b;
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

Result<SkipCalibration> calibrate_skip_layers(Session& s, std::span<const int32_t> tokens, int max_draft) {
  const Model& m = s.model();
  const int n_layer = m.config().n_layer, n_vocab = m.config().n_vocab;
  if (tokens.size() < 16) return make_error(Status::invalid_argument, "a calibration text of at least 16 tokens is needed");
  if (n_layer < 2) return make_error(Status::invalid_argument, "a model of one layer has no layer to skip");
  if (max_draft < 1) return make_error(Status::invalid_argument, "the draft length must be at least 1");
  const size_t n = std::min(tokens.size(), size_t(s.n_ctx() - 1));
  tokens = tokens.first(n);
  std::vector<float> logits(n * size_t(n_vocab));
  std::vector<int32_t> full(n);
  auto predictions = [&](std::span<const uint8_t> skip, std::vector<int32_t>& out) -> Result<void> {
    s.reset();
    PLLM_TRY(s.eval_skipping(tokens, skip, logits.data()));
    for (size_t i = 0; i < n; ++i) {
      const float* row = logits.data() + i * size_t(n_vocab);
      out[i] = int32_t(std::max_element(row, row + n_vocab) - row);
    }
    return {};
  };
  PLLM_TRY(predictions({}, full));

  // The cost side: what a drafted token costs (the kept layers' and the head's weight bytes over
  // the whole model's: decode streams them) and a verify row beyond the first (measured).
  size_t total = matrix_bytes(m.weights().output);
  std::vector<size_t> lb(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) total += (lb[size_t(l)] = layer_bytes(m.weights().layers[size_t(l)]));
  double row_cost = 0.15;
  {
    s.reset();
    const int k = std::min<int>(max_draft + 1, int(n) - 1);
    PLLM_TRY(s.eval_last(tokens.first(n - size_t(k) - 1)));
    const size_t base = s.history().size();
    double one = 1e30, many = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = Clock::now();
      PLLM_TRY(s.eval_last(tokens.subspan(base, 1)));
      one = std::min(one, ms_since(t0));
      s.truncate(base);
      t0 = Clock::now();
      PLLM_TRY(s.eval(tokens.subspan(base, size_t(k)), logits.data()));
      many = std::min(many, ms_since(t0));
      s.truncate(base);
    }
    if (one > 0) row_cost = std::max(0.0, (many - one) / (k - 1) / one);
  }

  std::vector<uint8_t> mask(size_t(n_layer), 0);
  std::vector<int32_t> pred(n);
  auto agreement = [&]() -> Result<double> {
    PLLM_TRY(predictions(mask, pred));
    size_t same = 0;
    for (size_t i = 0; i < n; ++i) same += pred[i] == full[i];
    return double(same) / double(n);
  };
  auto evaluate = [&](double agree, SkipCalibration& c) {
    size_t kept = total;
    for (int l = 0; l < n_layer; ++l) kept -= mask[size_t(l)] ? lb[size_t(l)] : 0;
    auto [k, rate] = best_length(agree, row_cost, double(kept) / double(total), max_draft);
    c.agreement = agree, c.speedup = rate, c.draft_tokens = k;
  };

  // Each layer alone first: the order in which to try them.
  std::vector<std::pair<double, int>> alone;
  for (int l = 0; l < n_layer; ++l) {
    mask[size_t(l)] = 1;
    PLLM_ASSIGN(double a, agreement());
    alone.push_back({a, l});
    mask[size_t(l)] = 0;
  }
  std::sort(alone.begin(), alone.end(), [](auto& x, auto& y) { return x.first > y.first || (x.first == y.first && x.second < y.second); });

  // Greedy: add the layer (of the few most harmless alone) that keeps the most agreement; keep
  // the best set seen by expected speed-up.
  SkipCalibration best;
  best.n_tokens = int(n);
  best.agreement = 1;
  SkipCalibration cur = best;
  std::vector<int> left;
  for (auto& a : alone) left.push_back(a.second);
  constexpr size_t kTryPerRound = 4;
  while (int(cur.skip_layers.size()) + 1 < n_layer && !left.empty()) {
    double top = -1;
    size_t pick = 0;
    for (size_t i = 0; i < std::min(kTryPerRound, left.size()); ++i) {
      mask[size_t(left[i])] = 1;
      PLLM_ASSIGN(double a, agreement());
      mask[size_t(left[i])] = 0;
      if (a > top) top = a, pick = i;
    }
    mask[size_t(left[pick])] = 1;
    cur.skip_layers.push_back(left[pick]);
    left.erase(left.begin() + ptrdiff_t(pick));
    evaluate(top, cur);
    if (cur.speedup > best.speedup) best = cur;
    if (top < 0.2) break;  // past any useful draft
  }
  s.reset();
  std::sort(best.skip_layers.begin(), best.skip_layers.end());
  return best;
}

Result<void> save_skip_layers(const std::string& path, const Model& m, const SkipCalibration& c) {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(m.identity()));
  nlohmann::json j = {{"model_identity", id},     {"skip_layers", c.skip_layers}, {"agreement", c.agreement},
                      {"speedup", c.speedup},     {"draft_tokens", c.draft_tokens}, {"n_tokens", c.n_tokens}};
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f.good()) return make_error(Status::io_error, "cannot write " + path);
  return {};
}

Result<std::vector<int>> load_skip_layers(const std::string& path, const Model& m) {
  std::ifstream f(path);
  if (!f) return make_error(Status::io_error, "cannot read the skip-layer file " + path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("skip_layers") || !j["skip_layers"].is_array() ||
      !j.contains("model_identity") || !j["model_identity"].is_string())
    return make_error(Status::bad_format, path + " is not a skip-layer file (from pocketllm draft-calibrate)");
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(m.identity()));
  if (j["model_identity"].get<std::string>() != id)
    return make_error(Status::invalid_argument, path + " was calibrated for another model");
  std::vector<int> out;
  for (const auto& v : j["skip_layers"]) {
    if (!v.is_number_integer()) return make_error(Status::bad_format, path + ": skip_layers must hold layer indices");
    out.push_back(v.get<int>());
  }
  if (out.empty())
    return make_error(Status::invalid_argument, path + ": the calibration found no layers whose skipping pays on this "
                                                       "model (a skip draft would only slow decoding)");
  return out;
}

}  // namespace pllm
