// --target-bpw planner (see bpw_plan.h).
#include "quantizer/bpw_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pllm {
namespace {

struct Step {
  size_t item, from, to;  // candidate indices
  double ratio;           // KL saved per extra bit
  uint64_t extra_bits;
  int order;              // position in the item's chain
};

// The upgrade chain of one item: candidate indices from the base along the lower convex
// hull of (bytes, KL), each strictly smaller in KL and larger in bytes, with strictly
// decreasing KL saved per extra byte.
std::vector<size_t> hull_chain(const std::vector<PlanCandidate>& c) {
  std::vector<size_t> idx;
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i].bytes > c[0].bytes && c[i].kl < c[0].kl) idx.push_back(i);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return c[a].bytes != c[b].bytes ? c[a].bytes < c[b].bytes : c[a].kl < c[b].kl;
  });
  std::vector<size_t> chain{0};
  auto slope = [&](size_t a, size_t b) {  // KL saved per extra byte from a to b
    return (c[a].kl - c[b].kl) / double(c[b].bytes - c[a].bytes);
  };
  for (size_t i : idx) {
    if (c[i].bytes == c[chain.back()].bytes || c[i].kl >= c[chain.back()].kl) continue;
    while (chain.size() >= 2 && slope(chain[chain.size() - 2], chain.back()) <= slope(chain.back(), i))
      chain.pop_back();
    chain.push_back(i);
  }
  return chain;
}

}  // namespace

Result<BpwPlan> plan_target_bpw(const std::vector<PlanItem>& items, double target_bpw) {
  if (items.empty()) return make_error(Status::invalid_argument, "no tensors to plan");
  if (!(target_bpw > 0) || !std::isfinite(target_bpw))
    return make_error(Status::invalid_argument, "the target bits per weight must be a positive number");
  BpwPlan plan;
  plan.choice.assign(items.size(), 0);
  for (const PlanItem& it : items) {
    if (it.candidates.empty())
      return make_error(Status::invalid_argument, "tensor '" + it.name + "' has no candidate types");
    for (const PlanCandidate& c : it.candidates)
      if (!std::isfinite(c.kl) || c.kl < 0)
        return make_error(Status::invalid_argument, "tensor '" + it.name + "' has a bad KL figure");
    plan.bytes += it.candidates[0].bytes;
    plan.elements += it.n_elements;
    plan.predicted_kl += it.candidates[0].kl;
  }
  // Budget in bits, compared in integers (bytes * 8 <= floor(B * elements)).
  const long double budget = static_cast<long double>(target_bpw) * static_cast<long double>(plan.elements);
  if (static_cast<long double>(plan.bytes) * 8 > budget) {
    char b[160];
    std::snprintf(b, sizeof b, "--target-bpw %.3f is below the %.3f bits per weight of every tensor at its base type",
                  target_bpw, plan.bpw());
    return make_error(Status::invalid_argument, b);
  }

  std::vector<Step> steps;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& c = items[i].candidates;
    const std::vector<size_t> chain = hull_chain(c);
    for (size_t k = 1; k < chain.size(); ++k) {
      const uint64_t extra = (c[chain[k]].bytes - c[chain[k - 1]].bytes) * 8;
      steps.push_back(Step{i, chain[k - 1], chain[k], (c[chain[k - 1]].kl - c[chain[k]].kl) / double(extra), extra,
                           int(k)});
    }
  }
  // Descending ratio; ties by item then chain position (deterministic, and an item's
  // steps keep their order since their ratios strictly decrease).
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    if (a.ratio != b.ratio) return a.ratio > b.ratio;
    return a.item != b.item ? a.item < b.item : a.order < b.order;
  });
  long double bits = static_cast<long double>(plan.bytes) * 8;
  for (const Step& s : steps) {
    if (bits + static_cast<long double>(s.extra_bits) > budget) break;
    bits += static_cast<long double>(s.extra_bits);
    const auto& c = items[s.item].candidates;
    plan.choice[s.item] = s.to;
    plan.bytes += c[s.to].bytes - c[s.from].bytes;
    plan.predicted_kl -= c[s.from].kl - c[s.to].kl;
  }
  plan.predicted_kl = std::max(plan.predicted_kl, 0.0);
  return plan;
}

}  // namespace pllm
