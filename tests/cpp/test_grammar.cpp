// GBNF parsing: every syntax feature (strings the grammar must accept and reject, fed through
// GrammarMatcher::accept_text), malformed grammars (one error each, with line:column), left
// recursion, limits, and the printer's round trip. Masks and vocabularies: test_grammar_mask.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"

using namespace pllm;

namespace {

// Whether `text` is a complete sentence of the grammar.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g, nullptr);
  return m.accept_text(text) && m.is_complete();
}

std::shared_ptr<const Grammar> parse_ok(std::string_view gbnf) {
  auto r = parse_gbnf(gbnf);
  EXPECT_TRUE(r.ok()) << gbnf << "\n-> " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : nullptr;
}

struct SyntaxCase {
  const char* name;
  const char* gbnf;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

const std::vector<SyntaxCase>& syntax_cases() {
  static const std::vector<SyntaxCase> cases = {
      {"literal", R"(root ::= "abc")", {"abc"}, {"", "ab", "abcd", "abd"}},
      {"sequence of literals", R"(root ::= "a" "b"   "c")", {"abc"}, {"ab", "a b c"}},
      {"alternatives", R"(root ::= "cat" | "dog" | "")", {"cat", "dog", ""}, {"ca", "cow"}},
      {"escapes", R"(root ::= "\n\r\t\\\"\[\]")", {"\n\r\t\\\"[]"}, {"\\n"}},
      {"hex escapes", R"(root ::= "\x41\u00e9\U0001F600")", {"A\xC3\xA9\xF0\x9F\x98\x80"}, {"A", "Ae"}},
      {"raw utf-8 literal", "root ::= \"h\xC3\xA9\xE2\x82\xAC\"", {"h\xC3\xA9\xE2\x82\xAC"}, {"he"}},
      {"char class", "root ::= [a-c0-9_]", {"a", "b", "c", "0", "9", "_"}, {"d", "A", "-", "", "ab"}},
      {"negated class", R"(root ::= [^a-z"])", {"A", "0", "\xC3\xA9", " "}, {"a", "q", "\"", ""}},
      {"class escapes", R"(root ::= [\]\[\\\-\n\x41])", {"]", "[", "\\", "-", "\n", "A"}, {"B", "x"}},
      {"class with literal dash at end", "root ::= [a-]", {"a", "-"}, {"b"}},
      {"class of non-ascii range", "root ::= [\xCE\xB1-\xCF\x89]+", {"\xCE\xB1\xCE\xB2", "\xCF\x89"}, {"a", ""}},
      {"any char", "root ::= . .", {"ab", "\xE2\x82\xAC" "x", "\n\n"}, {"a", "abc"}},
      {"rule reference", "root ::= greet \" \" name\ngreet ::= \"hi\" | \"yo\"\nname ::= [a-z]+",
       {"hi bob", "yo x"}, {"hi", "hey bob", "hi Bob"}},
      {"rule names with digits and dashes", "root ::= a-1 b2\na-1 ::= \"x\"\nb2 ::= \"y\"", {"xy"}, {"x", "yx"}},
      {"group", R"(root ::= ("a" | "b") "c")", {"ac", "bc"}, {"c", "abc"}},
      {"star", R"(root ::= "a"*)", {"", "a", "aaaa"}, {"b", "ab"}},
      {"plus", R"(root ::= "ab"+)", {"ab", "abab"}, {"", "a", "aba"}},
      {"optional", R"(root ::= "x"? "y")", {"y", "xy"}, {"xxy", "x"}},
      {"exact count", "root ::= [0-9]{3}", {"123"}, {"12", "1234"}},
      {"at least", "root ::= \"a\"{2,}", {"aa", "aaaaaa"}, {"", "a"}},
      {"between", "root ::= \"a\"{1,3}", {"a", "aa", "aaa"}, {"", "aaaa"}},
      {"up to", "root ::= \"a\"{0,2} \"b\"", {"b", "ab", "aab"}, {"aaab"}},
      {"zero count", "root ::= \"a\"{0} \"b\"", {"b"}, {"ab"}},
      {"spaces in braces", "root ::= \"a\"{ 1 , 2 }", {"a", "aa"}, {"aaa"}},
      {"repetition of a group", R"(root ::= ("ab" | "c"){2})", {"abab", "cc", "abc"}, {"ab", "ccc"}},
      {"repeated repetition", R"(root ::= "a"?*)", {"", "aaa"}, {"b"}},
      {"stacked operators", R"(root ::= "a"+? "b"++ "c"?? "d"+ *)", {"bd", "aabbbcdd", "abc"}, {"", "a", "bcc"}},
      {"braces then an operator", R"(root ::= "ab"{2}+ "c")", {"ababc", "ababababc"}, {"abc", "abababc", "abababababc"}},
      {"nullable item repeated", "root ::= (\"a\"? \"b\"?)* \"c\"", {"c", "abc", "bac", "aac"}, {"", "abd"}},
      {"empty literal", R"(root ::= "" "a" "")", {"a"}, {""}},
      {"comment lines", "# c\n\nroot ::= x # c\n# c\nx ::= \"a\"\n", {"a"}, {"b"}},
      {"newline after ::= and |", "root ::=\n  \"a\" |\n  \"b\"", {"a", "b"}, {"c"}},
      {"newlines inside groups", "root ::= (\n  \"a\"\n  \"b\"\n  | \"c\"\n)", {"ab", "c"}, {"a"}},
      {"crlf line ends", "root ::= x\r\nx ::= \"a\"\r\n", {"a"}, {""}},
      {"recursion", "root ::= \"(\" root \")\" | \"\"", {"", "()", "((()))"}, {"(", "())"}},
      {"right recursion", "root ::= [a-z] root | [a-z]", {"a", "abc"}, {""}},
      {"tail cycle is not left recursion", "root ::= a | \"x\"\na ::= b\nb ::= root | \"y\"", {"x", "y"}, {""}},
  };
  return cases;
}

TEST(grammar_syntax, EveryFeatureAcceptsAndRejects) {
  for (const SyntaxCase& c : syntax_cases()) {
    if (c.accept.empty() && c.reject.empty()) continue;
    SCOPED_TRACE(c.name);
    auto g = parse_ok(c.gbnf);
    if (!g) continue;
    for (const std::string& s : c.accept) EXPECT_TRUE(matches(g, s)) << "should accept '" << s << "'";
    for (const std::string& s : c.reject) EXPECT_FALSE(matches(g, s)) << "should reject '" << s << "'";
  }
}

TEST(grammar_syntax, PrintedGrammarParsesToTheSameLanguage) {
  for (const SyntaxCase& c : syntax_cases()) {
    if (c.accept.empty() && c.reject.empty()) continue;
    SCOPED_TRACE(c.name);
    auto g = parse_ok(c.gbnf);
    if (!g) continue;
    const std::string printed = grammar_to_gbnf(*g);
    auto again = parse_gbnf(printed);
    ASSERT_TRUE(again.ok()) << printed << "\n-> " << again.error().message;
    for (const std::string& s : c.accept) EXPECT_TRUE(matches(again.value(), s)) << printed << "\n'" << s << "'";
    for (const std::string& s : c.reject) EXPECT_FALSE(matches(again.value(), s)) << printed << "\n'" << s << "'";
    EXPECT_EQ(grammar_to_gbnf(*again.value()), printed) << "printing is a fixed point";
  }
}

TEST(grammar_syntax, NewlineEndsARuleOutsideGroups) {
  // llama.cpp: a newline ends the rule unless inside ( ) or right after `::=` / `|`, so a
  // leading `|` on the next line is an error, not a continuation.
  auto r = parse_gbnf("root ::= \"a\"\n| \"b\"");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("2:1"), std::string::npos) << r.error().message;
  auto two = parse_ok("root ::= \"a\" x\nx ::= \"b\"");
  ASSERT_TRUE(two);
  EXPECT_TRUE(matches(two, "ab"));
}

TEST(grammar_syntax, OtherStartRule) {
  auto r = parse_gbnf("start ::= \"s\"", "start");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(matches(r.value(), "s"));
}

struct BadCase {
  const char* gbnf;
  const char* where;  // "line:col" expected at the start of the message ("" when none applies)
  const char* says;   // a fragment of the message
};

TEST(grammar_errors, EachMalformedGrammarGivesOneClearError) {
  const std::vector<BadCase> cases = {
      {"", "", "no rule named 'root'"},
      {"other ::= \"a\"", "", "no rule named 'root'"},
      {"root ::= foo", "1:10", "undefined rule 'foo'"},
      {"root \"a\"", "1:6", "expected '::='"},
      {"root := \"a\"", "1:6", "expected '::='"},
      {"::= \"a\"", "1:1", "expected a rule name"},
      {"root ::= \"abc", "1:14", "unterminated string literal"},
      {"root ::= [abc", "1:14", "unterminated character class"},
      {"root ::= (\"a\"", "1:14", "expected ')'"},
      {"root ::= \"a\")", "1:13", "unexpected ')'"},
      {"root ::= *", "1:10", "expected an item before '*'"},
      {"root ::= | +", "1:12", "expected an item before '+'"},
      {"root ::= \"a\"{2,1}", "1:18", "maximum is below the minimum"},
      {"root ::= \"a\"{x}", "1:14", "expected a number"},
      {"root ::= \"a\"{1", "1:15", "expected '}'"},
      {"root ::= \"a\"{99999999999}", "1:", "above the limit"},
      {"root ::= \"\\q\"", "1:12", "unknown escape"},
      {"root ::= \"\\x4\"", "1:14", "hex digits"},
      {"root ::= \"\\U00110000\"", "1:11", "above U+10FFFF"},
      {"root ::= [z-a]", "1:13", "range ends below its start"},
      {"root ::= \"a\"\nroot ::= \"b\"", "2:1", "defined twice"},
      {"root ::= root \"a\"", "1:1", "left-recursive"},
      {"root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "2:1", "left-recursive"},
      {"root ::= x? root \"a\"\nx ::= \"b\"", "1:1", "left-recursive"},
      {"root ::= <|tool_call|>", "1:10", "token references are not supported"},
      {"root ::= !<[12]>", "1:10", "token references are not supported"},
      {"root ::= \"a\" $", "1:14", "expected an element"},
      {"root ::= \"\xFF\"", "1:11", "invalid UTF-8"},
      {"root ::= \"a\"\n  \"b\"", "2:3", "expected a rule name"},
  };
  for (const BadCase& c : cases) {
    auto r = parse_gbnf(c.gbnf);
    ASSERT_FALSE(r.ok()) << "accepted: " << c.gbnf;
    EXPECT_EQ(r.error().code, Status::invalid_argument);
    const std::string& msg = r.error().message;
    EXPECT_EQ(msg.rfind(c.where, 0), 0u) << c.gbnf << "\n-> " << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.gbnf << "\n-> " << msg;
  }
}

TEST(grammar_limits, DeepNestingInTheSourceIsAnErrorNotAStackOverflow) {
  const std::string deep = "root ::= " + std::string(60000, '(') + "\"a\"" + std::string(60000, ')');
  auto r = parse_gbnf(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested deeper"), std::string::npos) << r.error().message;
  // Within the limit it parses.
  GrammarLimits limits;
  const std::string ok = "root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')');
  auto fine = parse_gbnf(ok, "root", limits);
  ASSERT_TRUE(fine.ok()) << fine.error().message;
  EXPECT_TRUE(matches(fine.value(), "a"));
}

TEST(grammar_limits, SizeLimitsAreEnforced) {
  GrammarLimits small;
  small.max_text_bytes = 10;
  EXPECT_FALSE(parse_gbnf("root ::= \"abcdefgh\"", "root", small).ok());
  GrammarLimits few_rules;
  few_rules.max_rules = 5;
  auto r = parse_gbnf("root ::= \"a\"{0,10}", "root", few_rules);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more rules"), std::string::npos) << r.error().message;
  GrammarLimits few_elements;
  few_elements.max_elements = 100;
  EXPECT_FALSE(parse_gbnf("root ::= [a-z]{500}", "root", few_elements).ok());
  GrammarLimits rep;
  rep.max_repetition = 5;
  EXPECT_FALSE(parse_gbnf("root ::= \"a\"{6}", "root", rep).ok());
  EXPECT_TRUE(parse_gbnf("root ::= \"a\"{5}", "root", rep).ok());
  // Nested repetitions do not multiply: each level is a rule of its own.
  auto nested = parse_gbnf("root ::= ((\"ab\"{1000}){1000}){10}");
  ASSERT_TRUE(nested.ok()) << nested.error().message;
}

TEST(grammar_printer, GeneratedNamesDoNotCollideWithUserNames) {
  auto g = parse_ok("root ::= (\"a\" | \"b\") root-1\nroot-1 ::= \"c\"");
  ASSERT_TRUE(g);
  const std::string printed = grammar_to_gbnf(*g);
  auto again = parse_gbnf(printed);
  ASSERT_TRUE(again.ok()) << printed << "\n" << again.error().message;
  EXPECT_TRUE(matches(again.value(), "ac"));
  EXPECT_FALSE(matches(again.value(), "aa"));
}

}  // namespace
