// Strings of the JSON Schema compiler: canonical JSON encoding of characters, ECMAScript
// `pattern` subset -> GBNF, and the formats that can be enforced exactly.
//
// A pattern constrains the decoded string while the grammar reads JSON text, so every character
// a pattern allows is written in its canonical JSON form (raw UTF-8; `"`, `\` and controls
// escaped). Accepting only canonical encodings keeps the grammar exact: a `\u0061` can never
// smuggle an "a" past a class that forbids it.
#include <algorithm>
#include <cstdio>

#include "constrained/json_schema_internal.h"
#include "tokenizer/vocab.h"  // append_utf8

namespace pllm::schema_detail {

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  ranges.emplace_back(lo, hi);
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  ranges = std::move(merged);
}

void CodePointSet::add_set(const CodePointSet& other) {
  for (const auto& r : other.ranges) add(r.first, r.second);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& r : ranges) {
    if (r.first > next) out.ranges.emplace_back(next, r.first - 1);
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.ranges.emplace_back(next, kMaxCodePoint);
  // Surrogates are not characters of a UTF-8 string.
  CodePointSet cut;
  for (const auto& r : out.ranges) {
    if (r.second < 0xD800 || r.first > 0xDFFF) {
      cut.ranges.push_back(r);
      continue;
    }
    if (r.first < 0xD800) cut.ranges.emplace_back(r.first, 0xD7FF);
    if (r.second > 0xDFFF) cut.ranges.emplace_back(0xE000, r.second);
  }
  return cut;
}

bool decode_utf8(std::string_view s, std::vector<uint32_t>& out) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    out.push_back(cp);
    i += n;
  }
  return true;
}

namespace {

// A code point written so any GBNF parser reads it back (inside a literal or a class).
std::string gbnf_char(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return std::string(1, char(c));
  char buf[16];
  if (c <= 0xFF)
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
  else if (c <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04X", c);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", c);
  return buf;
}

// One control character inside a JSON string: its short escape if it has one, and \u00XX in
// either hex case (both decode to the same character).
std::string control_gbnf(uint32_t c) {
  const char* hex = "0123456789abcdef";
  const char low = hex[c & 0xF];
  std::string last = (low >= 'a') ? std::string("[") + low + char(low - 32) + "]" : gbnf_literal(std::string(1, low));
  std::string u = gbnf_literal(std::string("\\u00") + hex[c >> 4]) + " " + last;
  const char* shorts = nullptr;
  switch (c) {
    case 8: shorts = "\\b"; break;
    case 9: shorts = "\\t"; break;
    case 10: shorts = "\\n"; break;
    case 12: shorts = "\\f"; break;
    case 13: shorts = "\\r"; break;
    default: break;
  }
  return shorts ? "(" + gbnf_literal(shorts) + " | " + u + ")" : "(" + u + ")";
}

}  // namespace

std::string gbnf_literal(std::string_view text) {
  std::vector<uint32_t> cps;
  std::string out = "\"";
  if (!decode_utf8(text, cps)) {
    for (char ch : text) out += gbnf_char(static_cast<unsigned char>(ch));
    return out + "\"";
  }
  for (uint32_t c : cps) {
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\')
      out += char(c);
    else
      out += gbnf_char(c);
  }
  return out + "\"";
}

std::string gbnf_class(const CodePointSet& set) {
  std::string out = "[";
  for (const auto& [lo, hi] : set.ranges) {
    out += gbnf_char(lo);
    if (hi != lo) out += "-" + gbnf_char(hi);
  }
  return out + "]";
}

std::string json_char_gbnf(const CodePointSet& set) {
  CodePointSet raw;
  std::vector<std::string> alts;
  bool all_controls = false;
  for (const auto& [lo, hi] : set.ranges) {
    if (lo == 0 && hi >= 0x1F) all_controls = true;
  }
  for (const auto& [lo, hi] : set.ranges) {
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x1F); ++c)
      if (!all_controls) alts.push_back(control_gbnf(c));
    // The raw part: everything but `"`, `\` and controls.
    uint32_t from = std::max<uint32_t>(lo, 0x20);
    while (from <= hi) {
      uint32_t stop = hi;
      for (uint32_t special : {uint32_t('"'), uint32_t('\\')}) {
        if (special >= from && special <= stop) {
          if (special > from) raw.add(from, special - 1);
          alts.push_back(gbnf_literal(special == '"' ? "\\\"" : "\\\\"));
          from = special + 1;
        }
      }
      if (from <= stop) raw.add(from, stop);
      break;
    }
  }
  if (all_controls) {
    alts.push_back(gbnf_literal("\\") + " [bfnrt]");
    alts.push_back(gbnf_literal("\\u00") + " [01] [0-9a-fA-F]");
  }
  if (!raw.empty()) alts.insert(alts.begin(), gbnf_class(raw));
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::string json_string_content_gbnf(std::string_view utf8) {
  std::vector<uint32_t> cps;
  if (!decode_utf8(utf8, cps)) return gbnf_literal(utf8);  // nlohmann validated it already
  std::string out, run;
  auto flush = [&] {
    if (run.empty()) return;
    out += (out.empty() ? "" : " ") + gbnf_literal(run);
    run.clear();
  };
  for (uint32_t c : cps) {
    if (c >= 0x20 && c != '"' && c != '\\') {
      append_utf8(run, c);
      continue;
    }
    flush();
    CodePointSet one;
    one.add(c, c);
    out += (out.empty() ? "" : " ") + json_char_gbnf(one);
  }
  flush();
  return out;
}

namespace {

std::string two_digits(int v) { return std::string(1, char('0' + v / 10)) + char('0' + v % 10); }

// RFC 3339 full-time: hh:mm:ss[.frac] and an offset (Z, z or +hh:mm / -hh:mm). Second 60 (a
// leap second) only where the time in UTC is 23:59: for each offset the local hour and minute
// that meet it are written out (grouped per offset hour).
std::string full_time_gbnf(RuleTable& rules) {
  const std::string hour = rules.add("time-hour", "[01] [0-9] | \"2\" [0-3]");
  const std::string minute = rules.add("time-minute", "[0-5] [0-9]");
  const std::string frac = rules.add("time-frac", "(\".\" [0-9]+)?");
  const std::string offset = rules.add("time-offset", "[Zz] | [-+] " + hour + " \":\" " + minute);
  const std::string plain = hour + " \":\" " + minute + " \":\" [0-5] [0-9] " + frac + " " + offset;
  // Leap seconds. UTC 23:59 is local (23:59 + offset): with "+h:m", m = 0 gives (h + 23) % 24 : 59
  // and m >= 1 gives h : (m - 1); with "-h:m" it is (23 - h) : (59 - m).
  std::string leap = "\"23:59:60\" " + frac + " ([Zz] | [-+] \"00:00\")";
  for (int h = 0; h < 24; ++h) {
    std::string plus = "\"" + two_digits((h + 23) % 24) + ":59:60\" " + frac + " \"+" + two_digits(h) + ":00\"";
    std::string minus;
    for (int m = 1; m < 60; ++m) {
      plus += " | \"" + two_digits(h) + ":" + two_digits(m - 1) + ":60\" " + frac + " \"+" + two_digits(h) + ":" +
              two_digits(m) + "\"";
    }
    for (int m = 0; m < 60; ++m) {
      if (h == 0 && m == 0) continue;  // -00:00 is with Z above
      minus += std::string(minus.empty() ? "" : " | ") + "\"" + two_digits(23 - h) + ":" + two_digits(59 - m) +
               ":60\" " + frac + " \"-" + two_digits(h) + ":" + two_digits(m) + "\"";
    }
    leap += " | " + rules.add("leap-plus-" + two_digits(h), plus) + " | " + rules.add("leap-minus-" + two_digits(h), minus);
  }
  // "+00:00" with 00 minutes is (0 + 23) % 24 = 23:59, already in the first branch: harmless overlap.
  return rules.add("full-time", plain + " | " + rules.add("leap-second", leap));
}

std::string ipv4_gbnf(RuleTable& rules) {
  // Dotted decimal without leading zeros (RFC 2673 as the test suite reads it).
  const std::string octet =
      rules.add("ipv4-octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]");
  return rules.add("ipv4", octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet);
}

// RFC 3986's IPv6address: eight groups, "::" for a run of zero groups, an IPv4 tail; no zone.
std::string ipv6_gbnf(RuleTable& rules) {
  const std::string h16 = rules.add("h16", "[0-9a-fA-F]{1,4}");
  const std::string hc = rules.add("h16-colon", h16 + " \":\"");
  const std::string ls32 = rules.add("ls32", h16 + " \":\" " + h16 + " | " + ipv4_gbnf(rules));
  auto before = [&](int n) {  // [ *n( h16 ":" ) h16 ]
    return "(" + h16 + (n > 0 ? " (\":\" " + h16 + "){0," + std::to_string(n) + "}" : "") + ")?";
  };
  auto groups = [&](int n) { return n == 0 ? std::string() : hc + "{" + std::to_string(n) + "} "; };
  std::string alts = groups(6) + ls32 + " | \"::\" " + groups(5) + ls32;
  for (int k = 0; k <= 4; ++k) alts += " | " + before(k) + " \"::\" " + groups(4 - k) + ls32;
  alts += " | " + before(5) + " \"::\" " + h16 + " | " + before(6) + " \"::\"";
  return rules.add("ipv6", alts);
}

// An address as RFC 5321's Mailbox: a dot-atom or quoted local part, then a domain name or an
// address literal ([192.0.2.1], [IPv6:::1]). Quote and backslash take JSON escapes in the text.
std::string email_gbnf(RuleTable& rules) {
  const std::string atext = rules.add("email-atext", "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+");
  CodePointSet qtext;  // printable ASCII but the quote and the backslash
  qtext.add(0x20, 0x21);
  qtext.add(0x23, 0x5B);
  qtext.add(0x5D, 0x7E);
  CodePointSet quote, backslash, printable;
  quote.add('"', '"');
  backslash.add('\\', '\\');
  printable.add(0x20, 0x7E);
  const std::string quoted = rules.add("email-quoted", json_char_gbnf(quote) + " (" + json_char_gbnf(qtext) + " | " +
                                                           json_char_gbnf(backslash) + " " + json_char_gbnf(printable) +
                                                           ")* " + json_char_gbnf(quote));
  const std::string local = rules.add("email-local", atext + " (\".\" " + atext + ")* | " + quoted);
  const std::string label = rules.add("email-label", "[A-Za-z0-9] ([A-Za-z0-9-]* [A-Za-z0-9])?");
  const std::string domain = rules.add("email-domain", label + " (\".\" " + label + ")* | \"[\" " + ipv4_gbnf(rules) +
                                                           " \"]\" | \"[IPv6:\" " + ipv6_gbnf(rules) + " \"]\"");
  return rules.add("email", local + " \"@\" " + domain);
}

}  // namespace

Result<std::string> format_to_gbnf(std::string_view format, std::string_view pointer, RuleTable& rules) {
  if (format == "ipv6") return ipv6_gbnf(rules);
  if (format == "email") return email_gbnf(rules);
  if (format == "date-time") {
    PLLM_ASSIGN(std::string date, format_to_gbnf("date", pointer, rules));
    return rules.add("date-time", date + " [Tt] " + full_time_gbnf(rules));
  }
  if (format == "time") return full_time_gbnf(rules);
  if (format == "date") {
    const std::string any_day_31 = "(\"0\" [1-9] | [12] [0-9] | \"3\" [01])";
    const std::string any_day_30 = "(\"0\" [1-9] | [12] [0-9] | \"30\")";
    const std::string feb_day = "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
    // Leap years (Gregorian, RFC 3339): divisible by 4, centuries only when divisible by 400.
    const std::string div4 = "(\"0\" [48] | [2468] [048] | [13579] [26])";
    const std::string div4_with_00 = "(\"0\" [048] | [2468] [048] | [13579] [26])";
    const std::string leap = "([0-9] [0-9] " + div4 + " | " + div4_with_00 + " \"00\")";
    return rules.add("date", "[0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" " + any_day_31 +
                                 " | (\"0\" [469] | \"11\") \"-\" " + any_day_30 + " | \"02-\" " + feb_day +
                                 ") | " + leap + " \"-02-29\"");
  }
  if (format == "uuid") {
    const std::string h = "[0-9a-fA-F]";
    return rules.add("uuid", h + "{8} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{12}");
  }
  if (format == "ipv4") return ipv4_gbnf(rules);
  return schema_error("format", std::string(pointer), "'" + std::string(format) +
                                                  "' cannot be enforced exactly (supported: date, date-time, time, email, uuid, ipv4, ipv6)");
}

}  // namespace pllm::schema_detail
