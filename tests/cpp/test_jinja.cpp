// The Jinja interpreter's language pieces, its limits and its errors (the byte-for-byte
// comparison with Python jinja2 over real templates is tests/py/test_chat_templates.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_paths.h"
#include "tokenizer/jinja/render.h"

namespace {

using nlohmann::ordered_json;

std::string render_ok(const std::string& src, const ordered_json& vars = ordered_json::object()) {
  auto r = pllm::render_template(src, vars);
  EXPECT_TRUE(r.ok()) << src << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : std::string();
}

std::string render_error(const std::string& src, const ordered_json& vars = ordered_json::object()) {
  pllm::jinja::Limits limits;
  limits.max_loop_iterations = 10000;
  limits.max_output_bytes = 1 << 16;
  auto r = pllm::render_template(src, vars, std::nullopt, limits);
  EXPECT_FALSE(r.ok()) << src << " rendered " << (r.ok() ? r.value() : "");
  return r.ok() ? std::string() : r.error().message;
}

TEST(Jinja, WhitespaceControlAsHuggingFace) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indent before it
  EXPECT_EQ(render_ok("{% if true %}\n  yes\n  {% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render_ok("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render_ok("a {#- comment -#} b"), "ab");
  EXPECT_EQ(render_ok("x\n"), "x");  // one trailing newline is dropped
}

TEST(Jinja, ExpressionsAndFilters) {
  EXPECT_EQ(render_ok("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 10 / 4 }} {{ 2 ** 10 }} {{ 'a' ~ 1 ~ none }}"),
            "3 -4 2 2.5 1024 a1None");
  EXPECT_EQ(render_ok("{{ [1, 'a', none, true, 1.5] }} {{ {'k': [1]} }}"), "[1, 'a', None, True, 1.5] {'k': [1]}");
  EXPECT_EQ(render_ok("{{ 'héllo'[::-1] }} {{ 'héllo'|length }} {{ [1,2,3][-1] }} {{ [1,2,3][1:] }}"),
            "olléh 5 3 [2, 3]");
  EXPECT_EQ(render_ok("{{ '  x '|trim }}|{{ 'a,b'.split(',')|join('-') }}|{{ 'Ab'.lower() }}{{ 'x'|upper }}"),
            "x|a-b|abX");
  EXPECT_EQ(render_ok("{{ {'b': 1, 'a': 'é'}|tojson }} {{ [1]|tojson(indent=2) }}"),
            "{\"b\": 1, \"a\": \"é\"} [\n  1\n]");
  EXPECT_EQ(render_ok("{{ x|default('d') }} {{ 3 if x is defined else 4 }} {{ 1 in [1] and 'a' not in 'bc' }}"),
            "d 4 True");
  EXPECT_EQ(render_ok("{{ [{'n': 2}, {'n': 1}]|map(attribute='n')|sort|list }} {{ [1, 2, 3]|select('odd')|list }}"),
            "[1, 2] [1, 3]");
  EXPECT_EQ(render_ok("{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }}"), "0.30000000000000004 1e+20 1e-05");
}

TEST(Jinja, StatementsLoopsMacrosNamespaces) {
  EXPECT_EQ(render_ok("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ loop.index }}{{ k }}{{ v }}"
                      "{{ ',' if not loop.last }}{% endfor %}"),
            "1a1,2b2");
  EXPECT_EQ(render_ok("{% for x in range(10) if x is odd %}{% if x > 5 %}{% break %}{% endif %}"
                      "{% if x == 3 %}{% continue %}{% endif %}{{ x }}/{{ loop.length }} {% endfor %}"),
            "1/5 5/5 ");
  EXPECT_EQ(render_ok("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render_ok("{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}"
                      "{% set local = 1 %}{% endfor %}{{ ns.n }}{{ local is defined }}"),
            "6False");
  EXPECT_EQ(render_ok("{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}"
                      "{{ greet('a') }} {{ greet('b', punct='?') }}"),
            "hi a! hi b?");
  EXPECT_EQ(render_ok("{% set body %}in {{ 1 + 1 }}{% endset %}[{{ body }}]"), "[in 2]");
  EXPECT_EQ(render_ok("{% for m in messages %}{{ loop.previtem.role if loop.previtem }}>{{ m.role }} "
                      "{% endfor %}",
                      {{"messages", ordered_json::array({{{"role", "user"}}, {{"role", "assistant"}}})}}),
            ">user user>assistant ");
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  const std::string msg = render_error("{{ raise_exception('Roles must alternate') }}");
  EXPECT_NE(msg.find("Roles must alternate"), std::string::npos) << msg;
}

TEST(Jinja, StrftimeNowUsesTheGivenClock) {
  pllm::ChatContext ctx;
  ctx.now = 86400 * 365;  // 1971-01-01 (local time; the day is the same in every zone at noon UTC)
  ctx.now = *ctx.now + 12 * 3600;
  auto r = pllm::render_chat_template("{{ strftime_now('%Y') }}", ctx);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), "1971");
}

TEST(Jinja, MalformedTemplatesAreOneClearError) {
  EXPECT_NE(render_error("{% if x %}never closed").find("unclosed block"), std::string::npos);
  EXPECT_NE(render_error("{{ x | no_such_filter }}").find("no filter named 'no_such_filter'"), std::string::npos);
  EXPECT_NE(render_error("{{ 1 + }}").find("line 1"), std::string::npos);
  EXPECT_NE(render_error("{% frobnicate %}").find("unknown tag 'frobnicate'"), std::string::npos);
  EXPECT_NE(render_error("{{ 'unterminated }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(render_error("{# no end").find("comment"), std::string::npos);
  EXPECT_NE(render_error("{{ undefined_thing.attr }}").find("undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ none + 'a' }}").find("unsupported operand"), std::string::npos);
}

TEST(Jinja, HostileTemplatesHitLimitsNotTheStack) {
  EXPECT_NE(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(render_error("{% for i in range(100000) %}{% endfor %}").find("too many loop iterations"),
            std::string::npos);
  EXPECT_NE(render_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}")
                .find("too many loop iterations"),
            std::string::npos);
  EXPECT_NE(render_error("{{ 'x' * 100000000 }}").find("output too large"), std::string::npos);
  EXPECT_NE(render_error("{% set s = namespace(v='ab') %}{% for i in range(40) %}{% set s.v = s.v ~ s.v %}"
                         "{% endfor %}")
                .find("output too large"),
            std::string::npos);
  EXPECT_NE(render_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(render_error("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(render_error(std::string(5000, '{') + "% if x %}").size(), 0u);
  EXPECT_NE(render_error("{{ [1] * 1000000000000 }}").find("too many loop iterations"), std::string::npos);
  EXPECT_NE(render_error("{{ 2 ** 64 }}").find("integer overflow"), std::string::npos);
}

// Repeated flags once looped forever (a fuzz finding: the '-' test short-circuited the index's
// increment); a NUL byte after '%' is a conversion character, refused as Python refuses it.
TEST(Jinja, PercentFormatFlagsAndNul) {
  EXPECT_EQ(render_ok("{{ '%--5s|%-+3d|%0-4s|' % ('a', 7, 'b') }}"), "a    |+7 |b   |");
  EXPECT_EQ(render_ok("{{ '%--5s|'|format('a') }}"), "a    |");
  EXPECT_NE(render_error(std::string("{{ '%-\0s'|format(1) }}", 23)).find("unsupported format character"),
            std::string::npos);
}

TEST(Jinja, PowerByRepeatedSquaring) {
  EXPECT_EQ(render_ok("{{ (-1) ** 3 }} {{ (-1) ** 1000000000000 }} {{ 3 ** 5 }} {{ 0 ** 0 }} {{ (-2) ** 63 }}"),
            "-1 1 243 1 -9223372036854775808");
}

TEST(Jinja, BuiltTextIsBoundedAcrossTheRender) {
  // each string is small, but together they would be far more than the budget
  pllm::jinja::Limits limits;
  limits.max_built_bytes = 1 << 20;
  auto r = pllm::render_template("{% set s = 'x' * 60000 %}{% for i in range(100) %}{% set t = s|upper %}{% endfor %}",
                                 ordered_json::object(), std::nullopt, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("built too much text"), std::string::npos) << r.error().message;
}

TEST(Jinja, ChatContextDrivesARealTemplate) {
  // The variables ChatContext sets reach the template: Qwen3's thinking switch and its tools block.
  const std::string path = std::string(pllm::test::kSharedTestdata) + "/templates/Qwen-Qwen3-0.6B.jinja";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << " (shared/testdata beside the checkout)";
  std::ifstream f(path, std::ios::binary);
  std::stringstream source;
  source << f.rdbuf();
  pllm::ChatContext ctx;
  ctx.messages = pllm::chat_messages_json({{"system", "Be brief."}, {"user", "Hi"}});
  ctx.add_generation_prompt = true;
  auto plain = pllm::render_chat_template(source.str(), ctx);
  ctx.enable_thinking = false;
  auto no_think = pllm::render_chat_template(source.str(), ctx);
  ctx.tools = ordered_json::array({{{"type", "function"}, {"function", {{"name", "lookup"}}}}});
  auto tools = pllm::render_chat_template(source.str(), ctx);
  ASSERT_TRUE(plain.ok() && no_think.ok() && tools.ok());
  EXPECT_EQ(no_think.value(), plain.value() + "<think>\n\n</think>\n\n");
  EXPECT_NE(tools.value().find("{\"type\": \"function\", \"function\": {\"name\": \"lookup\"}}"),
            std::string::npos);
  EXPECT_NE(plain.value().find("Be brief."), std::string::npos);
}

}  // namespace
