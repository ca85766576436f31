// Sensitivity figures as JSON (see sensitivity_file.h).
#include "sensitivity_file.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/checked.h"
#include "quantize_report.h"
#include "quantizer/type_plan.h"

namespace cli {
namespace {

using nlohmann::json;

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016" PRIx64, v);
  return b;
}

// Field access that reports what is wrong instead of throwing.
struct Reader {
  std::string source;
  std::string error;

  const json* field(const json& obj, const char* key, json::value_t want, const std::string& where) {
    if (!error.empty()) return nullptr;
    auto it = obj.find(key);
    const bool number_ok = want == json::value_t::number_float && it != obj.end() && it->is_number();
    const bool unsigned_ok = want == json::value_t::number_unsigned && it != obj.end() && it->is_number_unsigned();
    if (it == obj.end() || !(number_ok || unsigned_ok || it->type() == want)) {
      error = source + ": " + where + " has no valid '" + key + "'";
      return nullptr;
    }
    return &*it;
  }
  std::string str(const json& obj, const char* key, const std::string& where) {
    const json* v = field(obj, key, json::value_t::string, where);
    return v ? v->get<std::string>() : std::string();
  }
  uint64_t u64(const json& obj, const char* key, const std::string& where) {
    const json* v = field(obj, key, json::value_t::number_unsigned, where);
    return v ? v->get<uint64_t>() : 0;
  }
  double num(const json& obj, const char* key, const std::string& where) {
    const json* v = field(obj, key, json::value_t::number_float, where);
    return v ? v->get<double>() : 0.0;
  }
  void fail(const std::string& what) {
    if (error.empty()) error = source + ": " + what;
  }
};

}  // namespace

std::string sensitivity_json(const pllm::SensitivityReport& rep, uint64_t model_identity, pllm::TensorType base,
                             pllm::QuantMethod method) {
  json tensors = json::array();
  for (const auto* e : by_kl(rep)) {
    json cands = json::array();
    for (size_t i = 0; i < e->candidates.size(); ++i) {
      const auto& c = e->candidates[i];
      cands.push_back({{"type", pllm::quant_type_name(c.type)}, {"bytes", c.bytes}, {"kl", c.kl}, {"measured", i == 0}});
    }
    tensors.push_back({{"name", e->name},
                       {"type", pllm::quant_type_name(e->type())},
                       {"kl", e->kl()},
                       {"bytes", e->bytes()},
                       {"n_elements", e->n_elements},
                       {"weight_error", e->weight_error},
                       {"candidates", cands}});
  }
  const json j = {{"model_identity", hex(model_identity)},
                  {"type", pllm::quant_type_name(base)},
                  {"method", pllm::quant_method_name(method)},
                  {"tokens", rep.tokens},
                  {"tensors", tensors}};
  return j.dump(2);
}

pllm::Result<pllm::SensitivityReport> parse_sensitivity_json(const std::string& text, const std::string& source,
                                                             const pllm::GgufFile& file, uint64_t model_identity,
                                                             pllm::TensorType base, pllm::QuantMethod method) {
  using pllm::Status;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return pllm::make_error(Status::invalid_argument, source + ": not valid JSON");
  Reader rd{source, {}};
  const std::string id = rd.str(j, "model_identity", "the file");
  const std::string type = rd.str(j, "type", "the file");
  const std::string meth = rd.str(j, "method", "the file");
  const json* tokens = rd.field(j, "tokens", json::value_t::number_unsigned, "the file");
  const json* tensors = rd.field(j, "tensors", json::value_t::array, "the file");
  if (rd.error.empty() && id != hex(model_identity))
    rd.fail("measured on another model (identity " + id + "), not on " + file.path() + " (identity " +
            hex(model_identity) + ")");
  if (rd.error.empty() && (type != pllm::quant_type_name(base) || meth != pllm::quant_method_name(method)))
    rd.fail("measured for --type " + type + " --method " + meth + ", not --type " + pllm::quant_type_name(base) +
            " --method " + pllm::quant_method_name(method));
  if (!rd.error.empty()) return pllm::make_error(Status::invalid_argument, rd.error);

  std::map<std::string, size_t> index;  // 2-D tensor name -> position in the file
  std::vector<const pllm::TensorInfo*> targets;
  for (const pllm::TensorInfo& t : file.tensors())
    if (t.dims.size() == 2) {
      index[t.name] = targets.size();
      targets.push_back(&t);
    }
  std::vector<pllm::SensitivityEntry> entries(targets.size());
  std::vector<bool> seen(targets.size(), false);
  for (const json& jt : *tensors) {
    if (!jt.is_object()) {
      rd.fail("a tensor entry is not an object");
      break;
    }
    const std::string name = rd.str(jt, "name", "a tensor");
    const std::string where = "tensor '" + name + "'";
    const uint64_t n_elements = rd.u64(jt, "n_elements", where);
    const double weight_error = rd.num(jt, "weight_error", where);
    const json* cands = rd.field(jt, "candidates", json::value_t::array, where);
    if (!rd.error.empty()) break;
    auto it = index.find(name);
    if (it == index.end()) {
      rd.fail(where + " is not a 2-D tensor of " + file.path());
      break;
    }
    const pllm::TensorInfo& t = *targets[it->second];
    if (seen[it->second]) rd.fail(where + " appears twice");
    if (n_elements != t.n_elements) rd.fail(where + " has another element count than in " + file.path());
    if (!std::isfinite(weight_error) || weight_error < 0) rd.fail(where + " has a bad weight_error");
    if (cands->empty()) rd.fail(where + " has no candidates");
    if (!rd.error.empty()) break;
    seen[it->second] = true;
    const std::vector<pllm::TensorType> allowed = pllm::plan_candidate_types(base, t.dims[0]);
    pllm::SensitivityEntry& e = entries[it->second];
    e.name = name;
    e.n_elements = n_elements;
    e.weight_error = weight_error;
    for (const json& jc : *cands) {
      if (!jc.is_object()) {
        rd.fail(where + ": a candidate is not an object");
        break;
      }
      const std::string tname = rd.str(jc, "type", where);
      const uint64_t bytes = rd.u64(jc, "bytes", where);
      const double kl = rd.num(jc, "kl", where);
      const json* measured = rd.field(jc, "measured", json::value_t::boolean, where);
      if (!rd.error.empty()) break;
      const auto ct = pllm::parse_quant_type(tname);
      const size_t k = e.candidates.size();
      const bool in_list = ct.ok() && std::find(allowed.begin(), allowed.end(), ct.value()) != allowed.end();
      const bool repeated = ct.ok() && std::any_of(e.candidates.begin(), e.candidates.end(),
                                                   [&](const auto& c) { return c.type == ct.value(); });
      if (!in_list || repeated || (k == 0) != (ct.ok() && ct.value() == allowed[0]) || measured->get<bool>() != (k == 0)) {
        rd.fail(where + ": candidate '" + tname + "' is not a " + (k == 0 ? "measured base type" : "predicted type") +
                " this tensor can have (or appears twice)");
        break;
      }
      const auto rb = pllm::row_bytes(uint32_t(ct.value()), t.dims[0]);
      const auto want = rb ? pllm::checked_mul(*rb, t.dims[1]) : std::nullopt;
      if (!want || *want != bytes) rd.fail(where + ": candidate '" + tname + "' has the wrong size");
      if (!std::isfinite(kl) || kl < 0) rd.fail(where + ": candidate '" + tname + "' has a bad KL");
      if (!rd.error.empty()) break;
      e.candidates.push_back(pllm::PlanCandidate{ct.value(), bytes, kl});
    }
    if (!rd.error.empty()) break;
  }
  for (size_t i = 0; rd.error.empty() && i < targets.size(); ++i)
    if (!seen[i]) rd.fail("tensor '" + targets[i]->name + "' of " + file.path() + " is missing");
  if (!rd.error.empty()) return pllm::make_error(Status::invalid_argument, rd.error);
  pllm::SensitivityReport rep;
  rep.entries = std::move(entries);
  const uint64_t n_tok = tokens->get<uint64_t>();
  rep.tokens = n_tok > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(n_tok);
  return rep;
}

}  // namespace cli
