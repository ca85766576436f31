// Mixed-precision planning for --target-bpw: per tensor one of its candidate types (any
// type whose block fits the rows, cheaper, as cheap or dearer than the base), so that the
// 2-D weights' bits per weight stay within a budget with the least predicted KL divergence
// (the per-tensor KLs are added up).
//
// Method: every tensor starts at its cheapest candidate (fewest bytes; among equal bytes
// the lowest KL, so an equally sized but more accurate type such as q4_k beside q4_0 is
// taken at no cost). From there the candidates on the lower convex hull of (bytes, KL) give
// a chain of upgrade steps with decreasing KL saved per extra bit. All tensors' steps are
// merged in order of that ratio (a tensor's own steps stay in order) and taken while they
// fit; the first step that does not fit ends the plan. That is the solution of the
// Lagrangian relaxation, so a larger budget never gives a larger predicted KL (it takes a
// longer prefix of the same sequence), at the price of possibly leaving a few bits of the
// budget unused. The budget is compared in integers: bytes * 8 <= floor(B * elements),
// the product computed exactly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "quant/types.h"

namespace pllm {

struct PlanCandidate {
  TensorType type = TensorType::F32;
  uint64_t bytes = 0;
  double kl = 0;  // predicted KL divergence with this tensor at this type
};

struct PlanItem {
  std::string name;
  uint64_t n_elements = 0;
  // [0]: the base type (what the sensitivity was measured with); the rest in any order.
  // The planner does not treat [0] specially.
  std::vector<PlanCandidate> candidates;
};

struct BpwPlan {
  std::vector<size_t> choice;  // per item: index into its candidates
  uint64_t bytes = 0;
  uint64_t elements = 0;
  double predicted_kl = 0;
  double bpw() const { return elements ? 8.0 * double(bytes) / double(elements) : 0.0; }
};

// Errors: no items, an item without candidates, a non-finite or negative KL, a total that
// overflows, or a budget below the cheapest plan (every tensor at its smallest candidate).
Result<BpwPlan> plan_target_bpw(const std::vector<PlanItem>& items, double target_bpw);

// floor(bpw * elements) computed exactly (saturating at UINT64_MAX); bpw finite, >= 0.
uint64_t budget_bits(double bpw, uint64_t elements);

}  // namespace pllm
