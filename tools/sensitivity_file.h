// The sensitivity figures as JSON: written by --sensitivity-out, read back by
// --sensitivity-in so that one (long) measurement can serve several --target-bpw budgets.
//
// {model_identity: "0x...", type, method, tokens,
//  tensors: [{name, type, kl, bytes, n_elements, weight_error,
//             candidates: [{type, bytes, kl, measured}]}]}
// tensors sorted by KL, largest first; type and kl are the base type's measured figures
// (candidates[0]).
#pragma once
#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "quantizer/row_quant.h"
#include "quantizer/sensitivity.h"

namespace cli {

std::string sensitivity_json(const pllm::SensitivityReport& rep, uint64_t model_identity, pllm::TensorType base,
                             pllm::QuantMethod method);

// Parses `text` (the contents of `source`, for messages) and checks it against the model:
// the same identity, base type and method; every 2-D tensor of `file` exactly once with
// its element count; per tensor the base type first (measured) and otherwise only types
// from plan_candidate_types, each at most once, with the byte size of that type for the
// tensor's shape; finite KLs >= 0. Entries come back in file order. Any mismatch or
// malformed field is an error naming the file.
pllm::Result<pllm::SensitivityReport> parse_sensitivity_json(const std::string& text, const std::string& source,
                                                             const pllm::GgufFile& file, uint64_t model_identity,
                                                             pllm::TensorType base, pllm::QuantMethod method);

}  // namespace cli
