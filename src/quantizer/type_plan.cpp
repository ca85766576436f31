// Per-tensor type rules (see type_plan.h).
#include "quantizer/type_plan.h"

#include "quantizer/row_quant.h"

namespace pllm {

Result<TensorTypeRule> parse_tensor_type_rule(std::string_view spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    return make_error(Status::invalid_argument,
                      "--tensor-type '" + std::string(spec) + "' should be REGEX=TYPE, e.g. 'attn_v=q8_0'");
  TensorTypeRule r;
  r.pattern = std::string(spec.substr(0, eq));
  try {
    r.re = std::regex(r.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return make_error(Status::invalid_argument, "--tensor-type '" + std::string(spec) + "': bad regex (" + e.what() + ")");
  }
  auto t = parse_quant_type(spec.substr(eq + 1));
  if (!t.ok()) return make_error(Status::invalid_argument, "--tensor-type '" + std::string(spec) + "': " + t.error().message);
  r.type = t.value();
  return r;
}

TensorType fallback_type(TensorType t, uint64_t cols) {
  auto fits = [&](TensorType x) { return row_bytes(uint32_t(x), cols).has_value(); };
  if (fits(t)) return t;
  if (t == TensorType::Q4_K && fits(TensorType::Q5_0)) return TensorType::Q5_0;
  if (t == TensorType::Q6_K && fits(TensorType::Q8_0)) return TensorType::Q8_0;
  return TensorType::F16;  // one element per block: always fits
}

TypeChoice choose_tensor_type(std::string_view name, const std::vector<uint64_t>& dims, bool has_output,
                              const TypePlanOptions& opts) {
  TypeChoice c;
  if (dims.size() != 2) return c;
  c.quantized = true;
  TensorType t = opts.base;
  bool decided = false;
  if (auto it = opts.explicit_types.find(name); it != opts.explicit_types.end()) {
    t = it->second;
    decided = true;
  }
  if (!decided) {
    const std::string n(name);
    for (const TensorTypeRule& r : opts.rules) {
      if (std::regex_search(n, r.re)) {
        t = r.type;
        decided = true;
        break;
      }
    }
  }
  if (!decided && !opts.pure) {
    const bool is_head = name == "output.weight" || (!has_output && name == "token_embd.weight");
    const bool low_bit = opts.base == TensorType::Q4_0 || opts.base == TensorType::Q4_1 ||
                         opts.base == TensorType::Q4_K || opts.base == TensorType::Q5_0 ||
                         opts.base == TensorType::Q5_1;
    if (is_head && low_bit) t = TensorType::Q6_K;
  }
  c.wanted = t;
  c.type = fallback_type(t, dims[0]);
  return c;
}

uint32_t llama_file_type(TensorType base) {
  switch (base) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q4_1: return 3;
    case TensorType::Q8_0: return 7;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    case TensorType::Q4_K: return 14;  // Q4_K_S
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
    default: return 0;
  }
}

}  // namespace pllm
