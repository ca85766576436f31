// JSON Schema -> GBNF: unsupported keywords are errors naming the keyword and the pointer of the
// schema holding it; hostile schemas (deep nesting, huge enums, left recursion) end in bounded
// time with an error or a grammar; and the grammars accept exactly what the schema allows
// (checked with the GBNF parser and matcher: integer ranges against brute force, patterns,
// formats, objects with optional properties, recursion, the app corpus in tests/data/schemas).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/grammar_matcher.h"
#include "constrained/json_schema.h"
#include "test_paths.h"

namespace pllm {
namespace {

using Json = nlohmann::ordered_json;

std::string error_of(const std::string& schema_text) {
  auto r = json_schema_to_gbnf(std::string_view(schema_text));
  return r.ok() ? std::string("(compiled)") : r.error().message;
}

std::string compile_ok(const std::string& schema_text, const JsonSchemaOptions& opts = {}) {
  auto r = json_schema_to_gbnf(std::string_view(schema_text), opts);
  EXPECT_TRUE(r.ok()) << schema_text << "\n" << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : std::string();
}

// Does the grammar accept the whole text?
class Checker {
 public:
  explicit Checker(const std::string& gbnf) {
    auto g = parse_gbnf(gbnf);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << gbnf;
    if (g.ok()) grammar_ = g.value();
  }
  bool accepts(std::string_view text) const {
    if (!grammar_) return false;
    GrammarMatcher m(grammar_, TokenVocab::from_pieces({}, {}));
    return m.accept_text(text) && m.is_complete();
  }

 private:
  std::shared_ptr<const Grammar> grammar_;
};

TEST(JsonSchema, UnsupportedKeywordsNameKeywordAndPointer) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {R"({"properties":{"tags":{"type":"array","uniqueItems":true}}})", "uniqueItems at /properties/tags: not supported"},
      {R"({"multipleOf":3})", "multipleOf at /: not supported"},
      {R"({"not":{"type":"null"}})", "not at /: not supported"},
      {R"({"if":{},"then":{}})", "if at /: not supported"},
      {R"({"items":{"contains":{"const":1}}})", "contains at /items: not supported"},
      {R"({"patternProperties":{"^a":{}}})", "patternProperties at /: not supported"},
      {R"({"$defs":{"a":{"minProperties":1}},"$ref":"#/$defs/a"})", "minProperties at /$defs/a: not supported"},
      {R"({"prefixItems":[{"dependentRequired":{}}]})", "dependentRequired at /prefixItems/0: not supported"},
      {R"({"properties":{"a/b":{"unevaluatedProperties":false}}})", "unevaluatedProperties at /properties/a~1b: not supported"},
      {R"({"$ref":"http://example.com/s.json"})", "$ref at /: 'http://example.com/s.json' is not a local reference"},
      {R"({"$ref":"#/$defs/missing"})", "$ref at /: '#/$defs/missing' does not resolve"},
      {R"({"$ref":"#"})", "$ref at /: '#' recurses without consuming input"},
      {R"({"type":"string","pattern":"(?=a)b"})", "pattern at /: lookaround"},
      {R"({"type":"string","pattern":"(a)\\1"})", "pattern at /: backreferences"},
      {R"({"type":"string","pattern":"\\bword"})", "pattern at /: word boundaries"},
      {R"({"type":"string","format":"hostname"})", "format at /: 'hostname' cannot be enforced exactly"},
      {R"({"type":"number","minimum":1.5})", "minimum at /: bounds on non-integer numbers"},
      {R"({"oneOf":[{"type":"integer"},{"minimum":2}]})", "oneOf at /: branches 0 and 1 may overlap"},
      {R"({"allOf":[{"pattern":"a"},{"pattern":"b"}]})", "allOf at /: pattern: two different values"},
      {R"({"type":"string","minLength":100000})", "minLength at /: above 10000"},
      {R"({"type":"strin"})", "type at /: unknown type 'strin'"},
      {R"({"items":[{}]})", "items at /: the array form is draft 2019"},
      {R"(false)", "schema at /: no JSON value satisfies it"},
      {R"([1,2)", "schema: not valid JSON"},
  };
  for (const auto& [schema, expected] : table) {
    const std::string got = error_of(schema);
    EXPECT_EQ(got.rfind(expected, 0), 0u) << schema << "\n  got:      " << got << "\n  expected: " << expected;
  }
}

TEST(JsonSchema, AnnotationsAndUnknownKeywordsAreIgnored) {
  compile_ok(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://x/y","title":"t",
                "description":"d","default":1,"examples":[1],"$comment":"c","deprecated":true,"readOnly":true,
                "writeOnly":false,"contentMediaType":"text/plain","x-vendor":{"anything":1},"type":"integer"})");
  compile_ok(R"({"uniqueItems":false})");  // constrains nothing
}

TEST(JsonSchema, HostileSchemasEndWithErrorsNotCrashes) {
  std::string deep;
  for (int i = 0; i < 60000; ++i) deep += R"({"items":)";
  deep += "true";
  for (int i = 0; i < 60000; ++i) deep += "}";
  EXPECT_NE(error_of(deep).find("nested deeper than"), std::string::npos);

  // The same depth built as a document, not text.
  Json doc = Json::object();
  Json* cur = &doc;
  for (int i = 0; i < 60000; ++i) cur = &((*cur)["items"] = Json::object());
  auto r = json_schema_to_gbnf(doc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested deeper than"), std::string::npos);

  // A huge enum: refused past the limit, compiled below it.
  Json big = Json::array();
  for (int i = 0; i < 20000; ++i) big.push_back("v" + std::to_string(i));
  EXPECT_FALSE(json_schema_to_gbnf(Json{{"enum", big}}).ok());
  big.erase(big.begin() + 9000, big.end());
  EXPECT_TRUE(json_schema_to_gbnf(Json{{"enum", big}}).ok());

  // Mutual recursion that never consumes input.
  EXPECT_NE(error_of(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})")
                .find("recurses without consuming input"),
            std::string::npos);
  // Recursion through allOf cannot be inlined: a clear error.
  EXPECT_NE(error_of(R"({"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}],"type":"object"}},"$ref":"#/$defs/a"})").find("$ref"),
            std::string::npos);
  // Repetition bounds that would blow the parser's rule limit.
  std::string many = R"({"type":"object","properties":{)";
  for (int i = 0; i < 20; ++i) many += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"string","maxLength":9000})";
  many += "}}";
  EXPECT_NE(error_of(many).find("repetition bounds"), std::string::npos);
}

TEST(JsonSchema, AnyJsonValue) {
  Checker c(json_value_gbnf());
  for (const char* ok : {"null", "true", "-0.5e+3", "\"a\\u00e9\\n\"", "[]", "[1, {\"a\": [null]}]", "{ }", "{\"k\":\"v\"}"})
    EXPECT_TRUE(c.accepts(ok)) << ok;
  for (const char* bad : {"", "nul", "01", "[1,]", "{\"a\"}", "\"\x01\"", "'a'", "1.", "{\"a\":1,}"})
    EXPECT_FALSE(c.accepts(bad)) << bad;
}

TEST(JsonSchema, WhitespaceIsBounded) {
  JsonSchemaOptions opts;
  opts.max_whitespace = 3;
  Checker c(compile_ok(R"({"type":"array","items":{"type":"integer"}})", opts));
  EXPECT_TRUE(c.accepts("[1,2]"));
  EXPECT_TRUE(c.accepts("[ 1 ,\n2\t]"));
  EXPECT_TRUE(c.accepts("[1,   2]"));
  EXPECT_FALSE(c.accepts("[1,    2]"));
  opts.max_whitespace = 0;
  Checker compact(compile_ok(R"({"type":"array","items":{"type":"integer"}})", opts));
  EXPECT_TRUE(compact.accepts("[1,2]"));
  EXPECT_FALSE(compact.accepts("[1, 2]"));
}

TEST(JsonSchema, IntegerRangesMatchBruteForce) {
  const std::vector<std::pair<std::string, std::string>> bounds = {
      {"\"minimum\":0", ""}, {"\"minimum\":-17", "\"maximum\":243"}, {"\"exclusiveMinimum\":9", "\"exclusiveMaximum\":101"},
      {"", "\"maximum\":-3"}, {"\"minimum\":100", "\"maximum\":100"}, {"\"minimum\":5.5", "\"maximum\":19.2"},
      {"\"minimum\":-250", "\"maximum\":-40"}, {"\"minimum\":7", ""}};
  for (const auto& [lo, hi] : bounds) {
    std::string schema = R"({"type":"integer")";
    if (!lo.empty()) schema += "," + lo;
    if (!hi.empty()) schema += "," + hi;
    schema += "}";
    Checker c(compile_ok(schema));
    const Json s = Json::parse(schema);
    for (int v = -400; v <= 400; ++v) {
      bool in = true;
      if (s.contains("minimum")) in &= v >= s["minimum"].get<double>();
      if (s.contains("maximum")) in &= v <= s["maximum"].get<double>();
      if (s.contains("exclusiveMinimum")) in &= v > s["exclusiveMinimum"].get<double>();
      if (s.contains("exclusiveMaximum")) in &= v < s["exclusiveMaximum"].get<double>();
      EXPECT_EQ(c.accepts(std::to_string(v)), in) << schema << " " << v;
      EXPECT_EQ(c.accepts(std::to_string(v) + ".0"), in) << schema << " " << v << ".0 (an integer in 2020-12)";
    }
    EXPECT_FALSE(c.accepts("007"));
    EXPECT_FALSE(c.accepts("1.5"));
  }
}

TEST(JsonSchema, PatternsSearchUnlessAnchored) {
  struct Case {
    const char* pattern;
    std::vector<const char*> yes, no;
  };
  const std::vector<Case> cases = {
      {"^[a-z]+\\d{2}$", {"ab12", "z00"}, {"ab1", "Ab12", "ab123", "12"}},
      {"b+", {"b", "abba", "xxbxx"}, {"", "aaa"}},
      {"^(cat|dog)s?$", {"cat", "dogs"}, {"cats!", "cow"}},
      {"x$", {"x", "abx"}, {"xa"}},
      {"^\\s*\\w+\\s*$", {"  abc ", "a_1"}, {"a b", ""}},
      {"^[^\"\\\\]*$", {"plain", ""}, {"a\\\"b", "back\\\\slash"}},
      {"^.{2,3}$", {"ab", "\xc3\xa9t\xc3\xa9"}, {"a", "abcd", "a\\nb"}},
      {"^a|b$", {"abc", "cab"}, {"cba", "bca"}},
      {"", {"", "anything"}, {}},
  };
  for (const auto& c : cases) {
    Json schema = {{"type", "string"}, {"pattern", c.pattern}};
    auto r = json_schema_to_gbnf(schema);
    ASSERT_TRUE(r.ok()) << c.pattern << ": " << r.error().message;
    Checker k(r.value());
    for (const char* s : c.yes) EXPECT_TRUE(k.accepts(std::string("\"") + s + "\"")) << c.pattern << " ~ " << s;
    for (const char* s : c.no) EXPECT_FALSE(k.accepts(std::string("\"") + s + "\"")) << c.pattern << " !~ " << s;
  }
}

TEST(JsonSchema, FormatsAndLengths) {
  Checker date(compile_ok(R"({"type":"string","format":"date"})"));
  for (const char* ok : {"\"2024-02-29\"", "\"2000-02-29\"", "\"1999-12-31\"", "\"2023-04-30\""}) EXPECT_TRUE(date.accepts(ok)) << ok;
  for (const char* bad : {"\"1900-02-29\"", "\"2023-02-29\"", "\"2023-04-31\"", "\"2023-13-01\"", "\"2023-1-01\""})
    EXPECT_FALSE(date.accepts(bad)) << bad;
  // RFC 3339: a leap second only where UTC is 23:59 (local time minus the offset).
  Checker dt(compile_ok(R"({"type":"string","format":"date-time"})"));
  for (const char* ok : {"\"2024-02-29T13:05:09Z\"", "\"1998-12-31t23:59:60.5z\"", "\"1998-12-31T15:59:60-08:00\"",
                         "\"1998-12-31T00:29:60+00:30\"", "\"1998-12-31T22:59:60+23:00\"", "\"2001-01-01T00:00:00.123+05:45\""})
    EXPECT_TRUE(dt.accepts(ok)) << ok;
  for (const char* bad : {"\"1998-12-31T23:58:60Z\"", "\"1998-12-31T22:59:60Z\"", "\"1998-12-31T23:59:61Z\"",
                          "\"1998-12-31T15:59:60+08:00\"", "\"2023-02-29T00:00:00Z\"", "\"2024-01-01T24:00:00Z\"",
                          "\"2024-01-01T12:00:00\"", "\"2024-01-01 12:00:00Z\"", "\"2024-01-01T12:00:00+24:00\""})
    EXPECT_FALSE(dt.accepts(bad)) << bad;
  Checker time(compile_ok(R"({"type":"string","format":"time"})"));
  EXPECT_TRUE(time.accepts("\"08:30:06.283185Z\""));
  EXPECT_TRUE(time.accepts("\"23:29:60+23:30\""));
  EXPECT_FALSE(time.accepts("\"08:30:06\""));
  EXPECT_FALSE(time.accepts("\"23:29:60-23:30\""));
  Checker ip6(compile_ok(R"({"type":"string","format":"ipv6"})"));
  for (const char* ok : {"\"::\"", "\"::1\"", "\"1:2:3:4:5:6:7:8\"", "\"1:2:3:4:5:6:7::\"", "\"::ffff:192.168.0.1\"",
                         "\"fe80::1:d6\""})
    EXPECT_TRUE(ip6.accepts(ok)) << ok;
  for (const char* bad : {"\"1::2::3\"", "\"12345::\"", "\"1:2:3:4:5:6:7\"", "\":1:2:3:4:5:6:7\"", "\"fe80::a%eth1\"",
                          "\"::1.2.3.256\""})
    EXPECT_FALSE(ip6.accepts(bad)) << bad;
  Checker email(compile_ok(R"({"type":"string","format":"email"})"));
  for (const char* ok : {"\"joe.bloggs@example.com\"", R"("\"joe bloggs\"@example.com")", "\"a@[IPv6:::1]\"",
                         "\"te~st@x.io\""})
    EXPECT_TRUE(email.accepts(ok)) << ok;
  for (const char* bad : {"\"2962\"", "\".a@x.io\"", "\"a..b@x.io\"", "\"a@b=c.io\"", "\"a@[127.0.0.300]\""})
    EXPECT_FALSE(email.accepts(bad)) << bad;
  Checker ip(compile_ok(R"({"type":"string","format":"ipv4"})"));
  EXPECT_TRUE(ip.accepts("\"192.168.0.255\""));
  EXPECT_FALSE(ip.accepts("\"192.168.0.256\""));
  EXPECT_FALSE(ip.accepts("\"192.168.00.1\""));
  Checker len(compile_ok(R"({"type":"string","minLength":2,"maxLength":3})"));
  EXPECT_TRUE(len.accepts("\"ab\""));
  EXPECT_TRUE(len.accepts("\"\xf0\x9f\x98\x80\\n\""));  // two code points: an emoji and an escaped newline
  EXPECT_FALSE(len.accepts("\"a\""));
  EXPECT_FALSE(len.accepts("\"abcd\""));
}

TEST(JsonSchema, ObjectsUseCanonicalKeyOrder) {
  Checker c(compile_ok(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
                            "required":["b"],"additionalProperties":{"type":"boolean"}})"));
  EXPECT_TRUE(c.accepts(R"({"b":"x"})"));
  EXPECT_TRUE(c.accepts(R"({"a":1,"b":"x"})"));
  EXPECT_TRUE(c.accepts(R"({"a":1,"b":"x","c":true,"ab":false})"));
  EXPECT_FALSE(c.accepts(R"({"a":1})"));              // b is required
  EXPECT_FALSE(c.accepts(R"({"b":"x","a":1})"));      // not the canonical order
  EXPECT_FALSE(c.accepts(R"({"b":"x","c":1})"));      // additional values are booleans
  EXPECT_FALSE(c.accepts(R"({"b":"x","a":true})"));   // a listed key cannot come back as additional
}

TEST(JsonSchema, CombinatorsAndRefs) {
  Checker merged(compile_ok(R"({"allOf":[{"properties":{"a":{"type":"integer","minimum":0}}},
                                          {"properties":{"a":{"maximum":5}},"required":["a"]}]})"));
  EXPECT_TRUE(merged.accepts(R"({"a":5})"));
  EXPECT_FALSE(merged.accepts(R"({"a":6})"));
  EXPECT_FALSE(merged.accepts(R"({})"));
  EXPECT_TRUE(merged.accepts("\"not an object\""));  // properties constrain objects only
  Checker one(compile_ok(R"({"oneOf":[{"type":"string"},{"type":"integer"},{"const":null}]})"));
  EXPECT_TRUE(one.accepts("\"s\""));
  EXPECT_TRUE(one.accepts("null"));
  EXPECT_FALSE(one.accepts("1.5"));
  Checker tagged(compile_ok(R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind"]},
      {"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string"}},"required":["kind"]}]})"));
  EXPECT_TRUE(tagged.accepts(R"({"kind":"a","x":1})"));
  EXPECT_TRUE(tagged.accepts(R"({"kind":"b","y":"s"})"));
  EXPECT_FALSE(tagged.accepts(R"({"kind":"b","y":1})"));
}

// The app corpus: every schema compiles; hand-written valid examples are accepted (compact and
// indented), invalid ones refused. jsonschema agrees on each example (test_json_schema_suite.py).
TEST(JsonSchema, AppCorpus) {
  const std::string dir = std::string(test::kSourceDir) + "/tests/data/schemas/";
  std::ifstream ex_file(dir + "examples.json");
  ASSERT_TRUE(ex_file) << dir;
  const Json examples = Json::parse(ex_file);
  ASSERT_GE(examples.size(), 5u);
  for (const auto& [name, cases] : examples.items()) {
    std::ifstream f(dir + name);
    std::stringstream ss;
    ss << f.rdbuf();
    Checker c(compile_ok(ss.str()));
    for (const auto& v : cases["valid"]) {
      EXPECT_TRUE(c.accepts(v.dump())) << name << " " << v.dump();
      EXPECT_TRUE(c.accepts(v.dump(2))) << name << " " << v.dump(2);
    }
    for (const auto& v : cases["invalid"]) EXPECT_FALSE(c.accepts(v.dump())) << name << " " << v.dump();
  }
}

}  // namespace
}  // namespace pllm
