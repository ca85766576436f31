// Integer ranges as digit rules: a decimal integer lies in [lo, hi] exactly when its digit string
// does, so the range is split by digit count and then digit by digit (the classic regex range
// construction), which keeps the grammar linear in the number of digits.
#include <string>

#include "constrained/json_schema_internal.h"

namespace pllm::schema_detail {
namespace {

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string join_seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

bool all_of_char(const std::string& s, size_t from, char c) {
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] != c) return false;
  return true;
}

// Digit strings of equal length n with L <= x <= H (lexicographic = numeric at equal length).
std::string same_length_range(const std::string& L, const std::string& H) {
  const size_t n = L.size();
  if (n == 0) return "";
  if (L[0] == H[0]) return join_seq(digit_class(L[0], L[0]), same_length_range(L.substr(1), H.substr(1)));
  std::string alts;
  auto add = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
  char mid_lo = L[0], mid_hi = H[0];
  if (!all_of_char(L, 1, '0')) {
    add(join_seq(digit_class(L[0], L[0]), same_length_range(L.substr(1), std::string(n - 1, '9'))));
    ++mid_lo;
  }
  std::string high_alt;
  if (!all_of_char(H, 1, '9')) {
    high_alt = join_seq(digit_class(H[0], H[0]), same_length_range(std::string(n - 1, '0'), H.substr(1)));
    --mid_hi;
  }
  if (mid_lo <= mid_hi) add(join_seq(digit_class(mid_lo, mid_hi), any_digits(n - 1)));
  if (!high_alt.empty()) add(high_alt);
  return "(" + alts + ")";
}

// Canonical decimals (no leading zeros) of magnitudes in [lo, hi], hi absent = unbounded.
std::string magnitude_range(uint64_t lo, std::optional<uint64_t> hi) {
  const std::string lo_s = std::to_string(lo);
  std::string alts;
  auto add = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
  const size_t max_len = hi ? std::to_string(*hi).size() : lo_s.size();
  for (size_t d = lo_s.size(); d <= max_len; ++d) {
    std::string from = d == lo_s.size() ? lo_s : "1" + std::string(d - 1, '0');
    std::string to = (hi && d == max_len) ? std::to_string(*hi) : std::string(d, '9');
    add(same_length_range(from, to));
  }
  // Unbounded: every number with more digits than lo.
  if (!hi) add("[1-9] " + any_digits(lo_s.size()) + " [0-9]*");
  return alts;
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi, RuleTable& rules) {
  if (lo && hi && *lo > *hi) return "";
  std::string alts;
  auto add = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    add(magnitude_range(from, hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt));
  }
  if (!lo || *lo < 0) {
    // Magnitudes of the negative part: [max(1, -hi), -lo]; -INT64_MIN computed in unsigned.
    const uint64_t from = hi && *hi < 0 ? 0 - static_cast<uint64_t>(*hi) : 1;
    std::optional<uint64_t> to;
    if (lo) to = 0 - static_cast<uint64_t>(*lo);
    add("\"-\" (" + magnitude_range(from, to) + ")");
  }
  // -0 is the number 0.
  if ((!lo || *lo <= 0) && (!hi || *hi >= 0)) add("\"-0\"");
  return rules.add("int-range", "(" + alts + ") (\".\" \"0\"+)?");
}

}  // namespace pllm::schema_detail
