// The rule table of the JSON Schema compiler: GBNF rules deduplicated by body, names made from
// schema locations (GBNF names allow letters, digits and '-'), and the repetition budget that
// keeps a compiled grammar within the parser's limits.
#include <algorithm>

#include "constrained/json_schema_internal.h"

namespace pllm::schema_detail {
namespace {

std::string sanitize_name(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
    if (out.size() >= 32) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "r" : out;
}

}  // namespace

std::string RuleTable::unique_name(std::string_view hint) {
  const std::string base = sanitize_name(hint);
  std::string name = base;
  for (int n = 1; used_names_.count(name); ++n) name = base + "-" + std::to_string(n);
  used_names_[name] = 1;
  return name;
}

void RuleTable::add_fixed(const std::string& name, const std::string& body) { rules_.emplace_back(name, body); }

std::string RuleTable::add(std::string_view name_hint, const std::string& body) {
  auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  std::string name = unique_name(name_hint);
  rules_.emplace_back(name, body);
  by_body_.emplace(body, name);
  return name;
}

std::string RuleTable::reserve(std::string_view name_hint) {
  std::string name = unique_name(name_hint);
  rules_.emplace_back(name, "");
  return name;
}

void RuleTable::define(const std::string& name, const std::string& body) {
  for (auto& [n, b] : rules_)
    if (n == name) b = body;
}

void RuleTable::reserve_names(const std::vector<std::string>& names) {
  for (const auto& n : names) used_names_[n] = 1;
}

std::string RuleTable::to_gbnf(const std::string& root_name, const std::string& root_body) const {
  std::string out = root_name + " ::= " + root_body + "\n";
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

Result<void> RuleTable::charge_repetition(int64_t count, std::string_view keyword, std::string_view pointer) {
  repetition_budget_ -= std::max<int64_t>(count, 0);
  if (repetition_budget_ < 0)
    return schema_error(keyword, std::string(pointer), "the grammar's repetition bounds add up past what the parser allows");
  return {};
}

}  // namespace pllm::schema_detail
