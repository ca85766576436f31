// --target-bpw planner (see bpw_plan.h).
#include "quantizer/bpw_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/checked.h"

namespace pllm {
namespace {

struct Step {
  size_t item, from, to;  // candidate indices
  double ratio;           // KL saved per extra bit
  uint64_t extra_bits;
  int order;              // position in the item's chain
};

// The cheapest candidate: fewest bytes, then the lowest KL, then the first.
size_t cheapest(const std::vector<PlanCandidate>& c) {
  size_t best = 0;
  for (size_t i = 1; i < c.size(); ++i)
    if (c[i].bytes < c[best].bytes || (c[i].bytes == c[best].bytes && c[i].kl < c[best].kl)) best = i;
  return best;
}

// The upgrade chain of one item: candidate indices from `start` along the lower convex
// hull of (bytes, KL), each strictly smaller in KL and larger in bytes, with strictly
// decreasing KL saved per extra byte.
std::vector<size_t> hull_chain(const std::vector<PlanCandidate>& c, size_t start) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].bytes > c[start].bytes && c[i].kl < c[start].kl) idx.push_back(i);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return c[a].bytes != c[b].bytes ? c[a].bytes < c[b].bytes : c[a].kl < c[b].kl;
  });
  std::vector<size_t> chain{start};
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

uint64_t budget_bits(double bpw, uint64_t elements) {
  if (!(bpw > 0) || elements == 0) return 0;
  if (!std::isfinite(bpw)) return std::numeric_limits<uint64_t>::max();
  // bpw = m * 2^(e - 53) exactly, m < 2^53; m * elements < 2^117 fits 128 bits.
  int e = 0;
  const double f = std::frexp(bpw, &e);
  const auto m = static_cast<unsigned __int128>(std::ldexp(f, 53));
  const unsigned __int128 p = m * elements;
  const int shift = e - 53;
  const unsigned __int128 max = std::numeric_limits<uint64_t>::max();
  unsigned __int128 r;
  if (shift >= 0) {
    if (shift >= 64 || p > (max >> shift)) return std::numeric_limits<uint64_t>::max();
    r = p << shift;
  } else {
    r = -shift >= 128 ? 0 : p >> -shift;
  }
  return r > max ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(r);
}

Result<BpwPlan> plan_target_bpw(const std::vector<PlanItem>& items, double target_bpw) {
  if (items.empty()) return make_error(Status::invalid_argument, "no tensors to plan");
  if (!(target_bpw > 0) || !std::isfinite(target_bpw))
    return make_error(Status::invalid_argument, "the target bits per weight must be a positive number");
  BpwPlan plan;
  plan.choice.assign(items.size(), 0);
  auto too_large = [] { return make_error(Status::invalid_argument, "the tensors' sizes overflow the plan's totals"); };
  for (size_t i = 0; i < items.size(); ++i) {
    const PlanItem& it = items[i];
    if (it.candidates.empty())
      return make_error(Status::invalid_argument, "tensor '" + it.name + "' has no candidate types");
    for (const PlanCandidate& c : it.candidates) {
      if (!std::isfinite(c.kl) || c.kl < 0)
        return make_error(Status::invalid_argument, "tensor '" + it.name + "' has a bad KL figure");
      if (!checked_mul(c.bytes, 8)) return too_large();
    }
    plan.choice[i] = cheapest(it.candidates);
    const auto bytes = checked_add(plan.bytes, it.candidates[plan.choice[i]].bytes);
    const auto elements = checked_add(plan.elements, it.n_elements);
    if (!bytes || !elements) return too_large();
    plan.bytes = *bytes;
    plan.elements = *elements;
  }
  const auto start_bits = checked_mul(plan.bytes, 8);
  if (!start_bits) return too_large();
  const uint64_t budget = budget_bits(target_bpw, plan.elements);
  if (*start_bits > budget) {
    char b[200];
    std::snprintf(b, sizeof b,
                  "--target-bpw %.3f is below the cheapest plan, %.3f bits per weight (every tensor at its smallest "
                  "candidate type)",
                  target_bpw, plan.bpw());
    return make_error(Status::invalid_argument, b);
  }

  std::vector<Step> steps;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& c = items[i].candidates;
    const std::vector<size_t> chain = hull_chain(c, plan.choice[i]);
    for (size_t k = 1; k < chain.size(); ++k) {
      const uint64_t extra = (c[chain[k]].bytes - c[chain[k - 1]].bytes) * 8;  // checked above
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
  uint64_t bits = *start_bits;
  for (const Step& s : steps) {
    const auto next = checked_add(bits, s.extra_bits);
    if (!next || *next > budget) break;
    bits = *next;
    plan.choice[s.item] = s.to;
  }
  plan.bytes = bits / 8;
  plan.predicted_kl = 0;
  for (size_t i = 0; i < items.size(); ++i) plan.predicted_kl += items[i].candidates[plan.choice[i]].kl;
  return plan;
}

}  // namespace pllm
