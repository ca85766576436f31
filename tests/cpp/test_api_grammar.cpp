// Grammars through the C API on the real SmolLM2 file (skipped when absent): bad grammars are
// one clear error; every reply sampled at temperature 1 under a schema parses and has the
// schema's shape; the scheduled runtime and the batched engine step write what pllm_generate
// writes under the same grammar.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pocketllm/pocketllm.h"
#include "real_model.h"

namespace {

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 24},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "city": {"enum": ["Paris", "London", "Tokyo"]}
  },
  "required": ["name", "age", "city"],
  "additionalProperties": false
})";

class ApiGrammar : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(real_model_path().c_str(), R_OK) != 0) return;
    ASSERT_EQ(pllm_model_load(real_model_path().c_str(), nullptr, &model_), PLLM_OK) << pllm_last_error();
  }
  static void TearDownTestSuite() {
    pllm_model_free(model_);
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "model not found at " << real_model_path();
  }
  static pllm_model* model_;
};
pllm_model* ApiGrammar::model_ = nullptr;

int append_text(pllm_token, const char* t, size_t n, void* ud) {
  static_cast<std::string*>(ud)->append(t, n);
  return 0;
}

struct Reply {
  std::string text;
  pllm_generation_stats stats{};
};

Reply generate(pllm_model* m, const pllm_grammar* g, const char* user, float temperature, uint64_t seed,
               int max_tokens = 96) {
  const auto ids = chat_prompt(m, user);
  pllm_session* s = nullptr;
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 512;
  EXPECT_EQ(pllm_session_create(m, &sp, &s), PLLM_OK);
  pllm_sampling_params p = pllm_model_sampling_params(m);
  p.temperature = temperature;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.grammar = g;
  Reply r;
  EXPECT_EQ(pllm_generate(s, ids.data(), ids.size(), &p, append_text, &r.text, &r.stats), PLLM_OK) << pllm_last_error();
  pllm_session_free(s);
  return r;
}

TEST_F(ApiGrammar, BadGrammarsAreOneClearError) {
  pllm_grammar* g = reinterpret_cast<pllm_grammar*>(1);
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_GBNF, "root ::= \"a\" (", &g), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(g, nullptr);
  EXPECT_NE(std::string(pllm_last_error()).find("grammar"), std::string::npos) << pllm_last_error();
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_GBNF, "root ::= undefined-rule", &g), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("undefined-rule"), std::string::npos) << pllm_last_error();
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_JSON_SCHEMA, R"({"type": "array", "uniqueItems": true})", &g),
            PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("uniqueItems"), std::string::npos) << pllm_last_error();
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_JSON_SCHEMA, "{not json", &g), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_JSON, "{}", &g), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_GBNF, nullptr, &g), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pllm_grammar_create(model_, pllm_grammar_kind(7), "root ::= \"a\"", &g), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pllm_grammar_create(nullptr, PLLM_GRAMMAR_JSON, nullptr, &g), PLLM_ERR_INVALID_ARGUMENT);
}

TEST_F(ApiGrammar, AGrammarOfAnotherModelIsRefused) {
  pllm_model* other = nullptr;
  ASSERT_EQ(pllm_model_load(real_model_path().c_str(), nullptr, &other), PLLM_OK);
  pllm_grammar* g = nullptr;
  ASSERT_EQ(pllm_grammar_create(other, PLLM_GRAMMAR_JSON, nullptr, &g), PLLM_OK) << pllm_last_error();
  const auto ids = chat_prompt(model_, "hi");
  pllm_session* s = nullptr;
  ASSERT_EQ(pllm_session_create(model_, nullptr, &s), PLLM_OK);
  pllm_sampling_params p = pllm_model_sampling_params(model_);
  p.grammar = g;
  EXPECT_EQ(pllm_generate(s, ids.data(), ids.size(), &p, nullptr, nullptr, nullptr), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("another model"), std::string::npos) << pllm_last_error();
  pllm_session_free(s);
  pllm_grammar_free(g);
  pllm_model_free(other);
}

TEST_F(ApiGrammar, EveryHotReplyFollowsTheSchema) {
  pllm_grammar* g = nullptr;
  ASSERT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_JSON_SCHEMA, kPersonSchema, &g), PLLM_OK) << pllm_last_error();
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const Reply r = generate(model_, g, "Describe a person as JSON with name, age and city.", 1.0f, seed);
    ASSERT_EQ(r.stats.stop_reason, PLLM_STOP_EOG) << "seed " << seed << ": " << r.text;
    const auto j = nlohmann::json::parse(r.text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.text;
    ASSERT_TRUE(j.is_object()) << r.text;
    EXPECT_EQ(j.size(), 3u) << r.text;
    ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << r.text;
    EXPECT_LE(j["name"].get<std::string>().size(), 24u * 4) << r.text;
    ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << r.text;
    EXPECT_GE(j["age"].get<int64_t>(), 0);
    EXPECT_LE(j["age"].get<int64_t>(), 150);
    ASSERT_TRUE(j.contains("city") && j["city"].is_string()) << r.text;
    const std::string city = j["city"];
    EXPECT_TRUE(city == "Paris" || city == "London" || city == "Tokyo") << r.text;
  }
  pllm_grammar_free(g);
}

TEST_F(ApiGrammar, GreedyUnderAGrammarThatAllowsTheFreeReplyIsTheFreeReply) {
  // A grammar that allows any text: the constrained reply is the free one, token for token.
  pllm_grammar* any = nullptr;
  ASSERT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_GBNF, "root ::= [^\\x00]*", &any), PLLM_OK) << pllm_last_error();
  const Reply free = generate(model_, nullptr, "What is the capital of France?", 0.0f, 1, 24);
  const Reply constrained = generate(model_, any, "What is the capital of France?", 0.0f, 1, 24);
  EXPECT_EQ(constrained.text, free.text);
  EXPECT_NE(free.text.find("Paris"), std::string::npos) << free.text;
  pllm_grammar_free(any);
}

TEST_F(ApiGrammar, RuntimeAndEngineStepWriteWhatGenerateWrites) {
  pllm_grammar* g = nullptr;
  ASSERT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_JSON_SCHEMA, kPersonSchema, &g), PLLM_OK) << pllm_last_error();
  const char* user = "Describe a person as JSON with name, age and city.";
  const Reply want = generate(model_, g, user, 0.0f, 1);
  ASSERT_EQ(want.stats.stop_reason, PLLM_STOP_EOG) << want.text;
  const auto ids = chat_prompt(model_, user);

  // The scheduled runtime.
  pllm_engine* engine = nullptr;
  pllm_engine_params ep = pllm_engine_default_params();
  ep.n_threads = 2;
  ASSERT_EQ(pllm_engine_create(&ep, &engine), PLLM_OK);
  pllm_runtime* rt = nullptr;
  ASSERT_EQ(pllm_runtime_create(engine, model_, nullptr, &rt), PLLM_OK) << pllm_last_error();
  pllm_session_params ssp = pllm_session_default_params();
  ssp.n_ctx = 512;
  int64_t key = -1;
  ASSERT_EQ(pllm_runtime_add_session(rt, &ssp, &key), PLLM_OK);
  struct Out {
    std::string text;
    int ends = 0;
    pllm_end_reason reason = PLLM_END_FAILED;
  } out;
  pllm_sampling_params p = pllm_model_sampling_params(model_);
  p.temperature = 0;
  p.grammar = g;
  pllm_request r{};
  r.klass = PLLM_CLASS_INTERACTIVE;
  r.base_weight = -1;
  r.prompt = ids.data();
  r.n_prompt = ids.size();
  r.max_tokens = 96;
  r.sampling = &p;
  r.on_event = [](const pllm_event* e, void* ud) {
    auto* o = static_cast<Out*>(ud);
    if (e->kind == 0) o->text.append(e->text, e->text_len);
    else ++o->ends, o->reason = e->reason;
  };
  r.user_data = &out;
  uint64_t id = 0;
  ASSERT_EQ(pllm_runtime_submit(rt, key, &r, &id), PLLM_OK) << pllm_last_error();
  int32_t state = -1;
  for (int i = 0; i < 2000 && out.ends == 0; ++i) ASSERT_EQ(pllm_runtime_step(rt, &state), PLLM_OK);
  EXPECT_EQ(out.reason, PLLM_END_EOS);
  EXPECT_EQ(out.text, want.text);
  pllm_runtime_free(rt);

  // The batched engine step: two sessions in one step, each with the grammar.
  pllm_session* s[2] = {nullptr, nullptr};
  for (auto*& x : s) ASSERT_EQ(pllm_session_create_on(engine, model_, &ssp, &x), PLLM_OK) << pllm_last_error();
  std::vector<pllm_token> tokens[2], next[2];
  bool done[2] = {false, false};
  for (int i = 0; i < 2; ++i) next[i] = ids;
  for (int step = 0; step < 200 && !(done[0] && done[1]); ++step) {
    std::vector<pllm_step_item> items;
    std::vector<int> who;
    for (int i = 0; i < 2; ++i) {
      if (done[i]) continue;
      pllm_step_item it{};
      it.session = s[i];
      it.tokens = next[i].data();
      it.n_tokens = next[i].size();
      it.sampling = &p;
      items.push_back(it);
      who.push_back(i);
    }
    ASSERT_EQ(pllm_engine_step(engine, items.data(), items.size()), PLLM_OK) << pllm_last_error();
    for (size_t k = 0; k < items.size(); ++k) {
      const int i = who[k];
      ASSERT_EQ(items[k].status, PLLM_OK);
      const pllm_token t = items[k].token;
      if (pllm_model_is_eog(model_, t)) {
        done[i] = true;
        continue;
      }
      tokens[i].push_back(t);
      next[i] = {t};
    }
  }
  for (const auto& t : tokens) {
    std::string text(4096, '\0');
    size_t n = 0;
    ASSERT_EQ(pllm_detokenize(model_, t.data(), t.size(), 0, text.data(), text.size(), &n), PLLM_OK);
    text.resize(n);
    EXPECT_EQ(text, want.text);
  }
  for (auto* x : s) pllm_session_free(x);
  pllm_engine_free(engine);
  pllm_grammar_free(g);
}

TEST_F(ApiGrammar, TheGbnfOfASchemaComesBack) {
  pllm_grammar* g = nullptr;
  ASSERT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_JSON_SCHEMA, kPersonSchema, &g), PLLM_OK) << pllm_last_error();
  size_t n = 0;
  EXPECT_EQ(pllm_grammar_gbnf(g, nullptr, 0, &n), PLLM_ERR_OUT_OF_RANGE);
  ASSERT_GT(n, 0u);
  std::string text(n + 1, '\0');
  ASSERT_EQ(pllm_grammar_gbnf(g, text.data(), text.size(), &n), PLLM_OK);
  text.resize(n);
  EXPECT_NE(text.find("root"), std::string::npos) << text;
  pllm_grammar* again = nullptr;
  EXPECT_EQ(pllm_grammar_create(model_, PLLM_GRAMMAR_GBNF, text.c_str(), &again), PLLM_OK) << pllm_last_error();
  pllm_grammar_free(again);
  pllm_grammar_free(g);
}

}  // namespace

namespace {

const char* kWeatherTools = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
  "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
  "additionalProperties": false}}}])";

// The C API's tools: errors for bad arguments and another model's tools; the tokens of a
// required call parse into one call; tool_choice none has a constraint but no grammar text.
TEST_F(ApiGrammar, ToolsThroughTheCApi) {
  pllm_tools* t = nullptr;
  EXPECT_EQ(pllm_tools_create(model_, "not json", nullptr, 1, &t), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(pllm_tools_create(model_, kWeatherTools, "\"sometimes\"", 1, &t), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("sometimes"), std::string::npos) << pllm_last_error();
  ASSERT_EQ(pllm_tools_create(model_, kWeatherTools, "\"required\"", 0, &t), PLLM_OK) << pllm_last_error();

  const char* messages = R"([{"role": "user", "content": "Weather in Paris?"}])";
  char* text = nullptr;
  ASSERT_EQ(pllm_chat_apply_template_json(model_, messages, t, 1, nullptr, &text), PLLM_OK) << pllm_last_error();
  EXPECT_NE(std::string(text).find("get_weather"), std::string::npos);  // the generic tool prompt lists it
  std::vector<pllm_token> ids(4096);
  size_t n = 0;
  ASSERT_EQ(pllm_tokenize_prompt(model_, text, std::strlen(text), ids.data(), ids.size(), &n), PLLM_OK);
  ids.resize(n);
  pllm_string_free(text);

  pllm_session* s = nullptr;
  pllm_session_params sp = pllm_session_default_params();
  sp.n_ctx = 1024;
  sp.n_threads = 1;
  ASSERT_EQ(pllm_session_create(model_, &sp, &s), PLLM_OK);
  pllm_sampling_params samp = pllm_model_sampling_params(model_);
  samp.max_tokens = 120;
  samp.grammar = pllm_tools_grammar(t);
  std::vector<pllm_token> out;
  pllm_generation_stats st{};
  ASSERT_EQ(pllm_generate(s, ids.data(), ids.size(), &samp,
                          [](pllm_token tok, const char*, size_t, void* ud) {
                            static_cast<std::vector<pllm_token>*>(ud)->push_back(tok);
                            return 0;
                          },
                          &out, &st),
            PLLM_OK)
      << pllm_last_error();
  EXPECT_EQ(st.stop_reason, PLLM_STOP_EOG);
  char* json = nullptr;
  ASSERT_EQ(pllm_tools_parse(t, out.data(), out.size(), &json), PLLM_OK);
  const auto reply = nlohmann::json::parse(json);
  pllm_string_free(json);
  ASSERT_EQ(reply["tool_calls"].size(), 1u) << reply.dump();
  EXPECT_TRUE(reply["content"].is_null());
  EXPECT_EQ(reply["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(nlohmann::json::parse(reply["tool_calls"][0]["function"]["arguments"].get<std::string>()).contains("city"));
  const pllm_token bad = 1 << 30;
  EXPECT_EQ(pllm_tools_parse(t, &bad, 1, &json), PLLM_ERR_INVALID_ARGUMENT);
  pllm_session_free(s);

  // Tools made for another model (a second load of the same file is another model).
  pllm_model* other = nullptr;
  ASSERT_EQ(pllm_model_load(real_model_path().c_str(), nullptr, &other), PLLM_OK);
  EXPECT_EQ(pllm_chat_apply_template_json(other, messages, t, 1, nullptr, &text), PLLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pllm_last_error()).find("another model"), std::string::npos) << pllm_last_error();
  pllm_model_free(other);
  pllm_tools_free(t);

  pllm_tools* none = nullptr;
  ASSERT_EQ(pllm_tools_create(model_, kWeatherTools, "\"none\"", 1, &none), PLLM_OK);
  size_t written = 0;
  char buf[64];
  EXPECT_EQ(pllm_grammar_gbnf(pllm_tools_grammar(none), buf, sizeof buf, &written), PLLM_ERR_INVALID_ARGUMENT);
  pllm_tools_free(none);
}

}  // namespace
