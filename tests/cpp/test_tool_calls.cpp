// Tool calls: definitions and tool_choice checked; each format's calls written, accepted by the
// grammar, parsed back (whole and streamed a byte at a time and in random pieces, the streamed
// deltas accumulating to the whole parse); the lazy grammar in the sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "constrained/grammar_matcher.h"
#include "constrained/tool_calls.h"
#include "runtime/sampler.h"

namespace pllm {
namespace {

using Json = nlohmann::ordered_json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                  "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "exact": {"type": "boolean"},
                  "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
   "required": ["a", "b"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "make_tree", "parameters": {"type": "object",
   "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"], "additionalProperties": false,
   "$defs": {"node": {"type": "object", "properties": {"label": {"type": "string"},
             "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
             "required": ["label", "children"], "additionalProperties": false}}}}}
])";

std::vector<ToolDefinition> tools() {
  auto t = parse_tool_definitions(Json::parse(kTools));
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.value();
}

const ToolCallFormat kFormats[] = {ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::pythonic,
                                   ToolCallFormat::phi4};

std::vector<ToolCall> sample_calls() {
  return {{"", "get_weather", R"({"city":"Zürich \"old\" town","unit":"c"})"},
          {"", "add", R"({"a":-3,"b":40,"exact":true,"note":null})"},
          {"", "make_tree", R"({"root":{"label":"r","children":[{"label":"x","children":[]}]}})"}};
}

bool grammar_accepts(const ToolGrammar& g, std::string_view text) {
  GrammarMatcher m(g.grammar, TokenVocab::from_pieces({"", "a"}, {0}));
  return m.accept_text(text) && m.is_complete();
}

TEST(ToolDefinitions, BadEntriesNameTheField) {
  struct Case {
    const char* tools;
    const char* where;
  } cases[] = {
      {R"({})", "tools"},
      {R"([{"type": "code"}])", "tools[0].type"},
      {R"([{"type": "function"}])", "tools[0].function"},
      {R"([{"type": "function", "function": {"name": "a b"}}])", "tools[0].function.name"},
      {R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])",
       "tools[1].function.name"},
      {R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}])",
       "tools[0].function.parameters"},
  };
  for (const auto& c : cases) {
    auto r = parse_tool_definitions(Json::parse(c.tools));
    ASSERT_FALSE(r.ok()) << c.tools;
    EXPECT_EQ(r.error().message.rfind(std::string(c.where) + ":", 0), 0u) << r.error().message;
  }
}

TEST(ToolChoice, ModesAndErrors) {
  const auto t = tools();
  EXPECT_EQ(parse_tool_choice("none", t)->mode, ToolChoiceMode::none);
  EXPECT_EQ(parse_tool_choice("auto", t)->mode, ToolChoiceMode::automatic);
  EXPECT_EQ(parse_tool_choice("required", t)->mode, ToolChoiceMode::required);
  auto named = parse_tool_choice(Json::parse(R"({"type": "function", "function": {"name": "add"}})"), t);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->function, "add");
  EXPECT_FALSE(parse_tool_choice("sometimes", t).ok());
  EXPECT_FALSE(parse_tool_choice(Json::parse(R"({"type": "function", "function": {"name": "nope"}})"), t).ok());
  EXPECT_FALSE(parse_tool_choice("required", {}).ok());
}

TEST(ToolCallFormats, WrittenCallsParseBackAndTheGrammarAcceptsThem) {
  const auto t = tools();
  for (ToolCallFormat f : kFormats) {
    SCOPED_TRACE(tool_call_format_name(f));
    // llama3_json writes one call per reply.
    std::vector<ToolCall> calls = sample_calls();
    if (f == ToolCallFormat::llama3_json) calls.resize(1);
    for (size_t n = 1; n <= calls.size(); ++n) {
      std::vector<ToolCall> some(calls.begin(), calls.begin() + long(n));
      auto written = write_tool_calls(f, some);
      ASSERT_TRUE(written.ok()) << written.error().message;
      const std::string lead = f == ToolCallFormat::llama3_json ? "" : "Let me check.\n";
      const ToolReply r = parse_tool_reply(f, lead + *written, "call_");
      EXPECT_EQ(r.content, lead.empty() ? "" : "Let me check.");
      ASSERT_EQ(r.calls.size(), n) << *written;
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(r.calls[i].id, "call_" + std::to_string(i));
        EXPECT_EQ(r.calls[i].name, some[i].name);
        EXPECT_EQ(Json::parse(r.calls[i].arguments), Json::parse(some[i].arguments)) << *written;
      }
      // The grammar (tool_choice required, parallel when more than one) accepts exactly these.
      auto g = tool_call_grammar(f, t, {ToolChoiceMode::required, ""}, n > 1);
      ASSERT_TRUE(g.ok()) << g.error().message;
      EXPECT_TRUE(grammar_accepts(*g, *written)) << *written;
      if (n > 1) {
        auto single = tool_call_grammar(f, t, {ToolChoiceMode::required, ""}, false);
        EXPECT_FALSE(grammar_accepts(*single, *written)) << "parallel calls with parallel_tool_calls false";
      }
    }
    // Arguments against the schema, and tool_choice naming one function.
    auto g = tool_call_grammar(f, t, {ToolChoiceMode::required, ""}, false);
    auto bad_type = write_tool_calls(f, {{"", "add", R"({"a":"3","b":4})"}});
    auto missing = write_tool_calls(f, {{"", "get_weather", R"({"unit":"c"})"}});
    auto unknown = write_tool_calls(f, {{"", "rm_rf", R"({})"}});
    EXPECT_FALSE(grammar_accepts(*g, *bad_type)) << *bad_type;
    EXPECT_FALSE(grammar_accepts(*g, *missing)) << *missing;
    EXPECT_FALSE(grammar_accepts(*g, *unknown)) << *unknown;
    auto only_add = tool_call_grammar(f, t, {ToolChoiceMode::function, "add"}, false);
    EXPECT_TRUE(grammar_accepts(*only_add, write_tool_calls(f, {calls[0].name == "add" ? calls[0] : sample_calls()[1]}).value()));
    EXPECT_FALSE(grammar_accepts(*only_add, write_tool_calls(f, {sample_calls()[0]}).value()));
    EXPECT_TRUE(only_add->triggers.empty());
    auto none = tool_call_grammar(f, t, {ToolChoiceMode::none, ""}, true);
    EXPECT_EQ(none->grammar, nullptr);
    EXPECT_TRUE(none->refuse_triggers);
    auto automatic = tool_call_grammar(f, t, {ToolChoiceMode::automatic, ""}, true);
    EXPECT_FALSE(automatic->triggers.empty());
  }
}

TEST(ToolCallFormats, TextWithoutCallsIsContent) {
  for (ToolCallFormat f : kFormats) {
    for (const char* text : {"Paris is sunny.", "Use <tool_call> tags? {not json", "{\"name\": \"f\", broken",
                             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P"}) {
      const ToolReply r = parse_tool_reply(f, text, "c");
      EXPECT_TRUE(r.calls.empty()) << tool_call_format_name(f) << ": " << text;
      EXPECT_EQ(r.content, text);
    }
  }
}

// Streams a reply in pieces; checks OpenAI's rules on the deltas and that they add up to the whole parse.
void check_stream(ToolCallFormat f, const std::string& text, std::mt19937& rng, bool byte_at_a_time) {
  const ToolReply whole = parse_tool_reply(f, text, "id");
  ToolCallStream s(f, "id");
  std::string content;
  std::map<int, std::string> args, names, ids;
  std::map<int, int> pieces;
  auto take = [&](const ToolStreamDelta& d) {
    content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (pieces[c.index]++ == 0) {
        EXPECT_FALSE(c.id.empty());
        EXPECT_FALSE(c.name.empty());
        ids[c.index] = c.id;
        names[c.index] = c.name;
      } else {
        EXPECT_TRUE(c.id.empty() && c.name.empty()) << "id and name only in a call's first delta";
      }
      args[c.index] += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size();) {
    const size_t n = byte_at_a_time ? 1 : std::uniform_int_distribution<size_t>(1, 9)(rng);
    take(s.push(std::string_view(text).substr(i, n)));
    i += n;
  }
  take(s.finish());
  ASSERT_EQ(names.size(), whole.calls.size()) << text;
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    EXPECT_EQ(ids[int(i)], whole.calls[i].id);
    EXPECT_EQ(names[int(i)], whole.calls[i].name);
    EXPECT_EQ(Json::parse(args[int(i)]), Json::parse(whole.calls[i].arguments)) << args[int(i)];
  }
  const auto trim = [](std::string x) {
    while (!x.empty() && std::isspace(static_cast<unsigned char>(x.back()))) x.pop_back();
    while (!x.empty() && std::isspace(static_cast<unsigned char>(x.front()))) x.erase(x.begin());
    return x;
  };
  EXPECT_EQ(trim(content), whole.content);
}

TEST(ToolCallStream, DeltasAddUpToTheWholeParse) {
  std::mt19937 rng(7);
  for (ToolCallFormat f : kFormats) {
    SCOPED_TRACE(tool_call_format_name(f));
    std::vector<ToolCall> calls = sample_calls();
    if (f == ToolCallFormat::llama3_json) calls.resize(1);
    const std::string written = write_tool_calls(f, calls).value();
    const std::string lead = f == ToolCallFormat::llama3_json ? "" : "Checking ünïcode first. ";
    for (bool bytewise : {true, false}) {
      check_stream(f, lead + written, rng, bytewise);
      check_stream(f, "No call here, only <tool text.", rng, bytewise);
    }
  }
  // hermes: calls between text, in two blocks.
  const std::string two = "A " + write_tool_calls(ToolCallFormat::hermes, {sample_calls()[0]}).value() + " and " +
                          write_tool_calls(ToolCallFormat::hermes, {sample_calls()[1]}).value();
  check_stream(ToolCallFormat::hermes, two, rng, true);
  EXPECT_EQ(parse_tool_reply(ToolCallFormat::hermes, two, "x").calls.size(), 2u);
}

TEST(ToolConversation, GenericTemplatesGetToolsInTheSystemTurn) {
  const auto t = tools();
  ToolCallStyle generic = detect_tool_call_style("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_FALSE(generic.renders_tools);
  std::vector<ChatMessage> msgs = {{"user", "Weather in Paris?", {}, {}, {}},
                                   {"assistant", "", {{"call_1", "get_weather", R"({"city":"Paris"})"}}, {}, {}},
                                   {"tool", "sunny", {}, "call_1", "get_weather"}};
  auto conv = tool_conversation(generic, msgs, t);
  ASSERT_TRUE(conv.ok()) << conv.error().message;
  ASSERT_EQ(conv->messages.size(), 4u);
  EXPECT_EQ(conv->messages[0].role, "system");
  EXPECT_NE(conv->messages[0].content.find("\"name\":\"get_weather\""), std::string::npos);
  EXPECT_NE(conv->messages[2].content.find("<tool_call>"), std::string::npos);
  EXPECT_TRUE(conv->messages[2].tool_calls.empty());
  EXPECT_EQ(conv->messages[3].role, "user");
  EXPECT_EQ(conv->messages[3].content, "<tool_response>\nsunny\n</tool_response>");
  EXPECT_TRUE(conv->tools.is_null());

  ToolCallStyle qwen = detect_tool_call_style("{%- if tools %}<tool_call>{% endif %}{{ message.tool_calls }}");
  EXPECT_EQ(qwen.format, ToolCallFormat::hermes);
  auto native = tool_conversation(qwen, msgs, t);
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native->messages.size(), 3u);
  EXPECT_EQ(native->tools.size(), 3u);
  EXPECT_EQ(native->messages[1].tool_calls.size(), 1u);

  // A tool result answering no call, a call whose arguments are not an object: errors.
  std::vector<ChatMessage> orphan = {{"user", "hi", {}, {}, {}}, {"tool", "x", {}, "call_9", {}}};
  EXPECT_FALSE(tool_conversation(generic, orphan, t).ok());
  msgs[2].tool_call_id = "call_2";
  EXPECT_FALSE(tool_conversation(generic, msgs, t).ok());
  std::vector<ChatMessage> bad_args = {{"assistant", "", {{"c", "add", "[1,2]"}}, {}, {}}};
  EXPECT_FALSE(tool_conversation(generic, bad_args, t).ok());
  EXPECT_FALSE(tool_conversation(detect_tool_call_style("<function=x>"), msgs, t).ok());
}

// The sampler's lazy grammar: free text, then the trigger, then only what the grammar allows.
TEST(SamplerTriggers, LazyGrammarHoldsFromTheTrigger) {
  const std::vector<std::string> pieces = {"",  "Hi",  " ", "<tool_call>", "\n", "{\"name\": \"add\", ",
                                           "\"arguments\": {\"a\": 1, \"b\": 2}}", "</tool_call>", "x", "<tool"};
  auto vocab = TokenVocab::from_pieces(pieces, {0});
  const auto t = tools();
  auto g = tool_call_grammar(ToolCallFormat::hermes, t, {ToolChoiceMode::automatic, ""}, false);
  ASSERT_TRUE(g.ok());
  GrammarConstraint c{g->grammar, vocab, g->triggers, false};
  SamplingConfig greedy;
  greedy.temperature = 0;
  Sampler s(greedy, int(pieces.size()), c);
  // Each step: the token the logits prefer; "x" is preferred inside the call but refused there.
  auto step = [&](std::vector<int> order) {
    std::vector<float> logits(pieces.size(), -5.0f);
    for (size_t i = 0; i < order.size(); ++i) logits[size_t(order[i])] = 10.0f - float(i);
    return s.sample(logits.data(), {});
  };
  EXPECT_EQ(step({8}), 8);   // "x": free text before the trigger
  EXPECT_EQ(step({1}), 1);
  EXPECT_EQ(s.grammar(), nullptr);
  EXPECT_EQ(step({3}), 3);   // the trigger: the grammar holds from here
  ASSERT_NE(s.grammar(), nullptr);
  EXPECT_EQ(step({8, 0, 4}), 4);  // "x" and end of generation refused, "\n" allowed
  EXPECT_EQ(step({8, 5}), 5);
  EXPECT_EQ(step({8, 6}), 6);
  EXPECT_EQ(step({0, 4, 7}), 4);  // not complete yet: no end
  EXPECT_EQ(step({8, 7}), 7);
  EXPECT_EQ(step({8, 0}), 0);     // complete: the end

  // tool_choice none: a token that would complete the trigger is never drawn.
  auto none = tool_call_grammar(ToolCallFormat::hermes, t, {ToolChoiceMode::none, ""}, false);
  Sampler n(greedy, int(pieces.size()), GrammarConstraint{nullptr, vocab, none->triggers, true});
  std::vector<float> logits(pieces.size(), 0.0f);
  logits[3] = 9;
  logits[1] = 5;
  EXPECT_EQ(n.sample(logits.data(), {}), 1);
  std::vector<float> again(pieces.size(), 0.0f);
  again[9] = 9;  // "<tool" then "_call>" spelled in pieces: the second piece does not exist, so "<tool" is fine
  EXPECT_EQ(n.sample(again.data(), {}), 9);
}

TEST(ToolCallStyle, FamiliesFromTheirTemplates) {
  EXPECT_EQ(detect_tool_call_style("<|start_header_id|>{{ tools }}").format, ToolCallFormat::llama3_json);
  EXPECT_EQ(detect_tool_call_style("{{ '<tool_call>' }}{{ tools }}").format, ToolCallFormat::hermes);
  EXPECT_EQ(detect_tool_call_style("<|tool|>{{ tools }}<|/tool|>").format, ToolCallFormat::phi4);
  EXPECT_EQ(detect_tool_call_style("<|tool_call_start|>{{ tools }}").format, ToolCallFormat::pythonic);
  EXPECT_FALSE(detect_tool_call_style("<|tool_call>call:").unsupported.empty());
}

}  // namespace
}  // namespace pllm
