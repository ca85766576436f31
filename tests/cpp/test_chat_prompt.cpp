// The engine's chat prompt (model/chat_prompt.h): the file's own template rendered by the Jinja
// interpreter gives the same tokens as the built-in family layout on the real models, whose
// layouts tests/cpp/test_chat_template.cpp checks against the families' documented formats;
// a template the interpreter cannot render is one error naming the fallback.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/chat_prompt.h"
#include "model/model.h"
#include "test_paths.h"

using namespace pllm;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const Model> vocab_of(const char* name) {
  fs::path p = fs::path(pllm::test::kSourceDir) / "models" / name;
  if (const char* env = std::getenv("POCKETLLM_MODELS"); env && fs::exists(fs::path(env) / name))
    p = fs::path(env) / name;
  if (!fs::exists(p)) return nullptr;
  auto m = Model::load(p.string(), /*vocab_only=*/true);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

const std::vector<std::vector<ChatMessage>> kConversations = {
    {{"user", "What is the capital of France?"}},
    {{"system", "You answer in one word."}, {"user", "Capital of Italy?"}},
    {{"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "  Tell me a joke.\n"}},
    {{"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}, {"user", "And 3+3?"}},
};

// Tokens of a conversation both ways, after encode_chat_prompt.
void expect_same_tokens(const std::string& tmpl, ChatFamily family, const Tokenizer& tok,
                        const std::vector<ChatMessage>& conv, bool gen) {
  auto file = apply_chat_template(tmpl, family, tok, conv, gen, ChatTemplateMode::file);
  auto native = apply_chat_template(tmpl, family, tok, conv, gen, ChatTemplateMode::native);
  ASSERT_TRUE(file.ok()) << file.error().message;
  ASSERT_TRUE(native.ok()) << native.error().message;
  auto a = encode_chat_prompt(tok, *file);
  auto b = encode_chat_prompt(tok, *native);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b) << "file:\n" << *file << "\nnative:\n" << *native;
  // One BOS at most, whether or not the template writes it.
  if (tok.bos() >= 0 && a->size() >= 2) EXPECT_FALSE((*a)[0] == tok.bos() && (*a)[1] == tok.bos());
}

TEST(ChatPrompt, SmolLM2FileTemplateGivesTheNativeLayoutsTokens) {
  std::shared_ptr<const Model> m = vocab_of("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!m) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found ($POCKETLLM_MODELS or models/)";
  ASSERT_FALSE(m->chat_template().empty());
  EXPECT_EQ(m->chat_family(), ChatFamily::chatml);
  for (const auto& conv : kConversations)
    for (bool gen : {true, false}) expect_same_tokens(m->chat_template(), m->chat_family(), m->tokenizer(), conv, gen);
}

// Gemma 3 270M's file has no template (a base model): Gemma 2's instruction template (the same
// turn markers; it writes {{ bos_token }} itself and rejects a system role) over its vocabulary.
TEST(ChatPrompt, GemmaTemplateWritesBosOnceAndMatchesTheNativeLayout) {
  std::shared_ptr<const Model> m = vocab_of("gemma-3-270m-Q4_K_M.gguf");
  if (!m) GTEST_SKIP() << "gemma-3-270m-Q4_K_M.gguf not found ($POCKETLLM_MODELS or models/)";
  const fs::path t = fs::path(pllm::test::kSourceDir) / ".." / "shared" / "testdata" / "templates" /
                     "google-gemma-2-2b-it.jinja";
  if (!fs::exists(t)) GTEST_SKIP() << t << " not found (../shared/testdata/templates)";
  std::ifstream in(t);
  const std::string tmpl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const ChatFamily fam = detect_chat_family(tmpl);
  ASSERT_EQ(fam, ChatFamily::gemma);
  auto written = apply_chat_template(tmpl, fam, m->tokenizer(), kConversations[0], true);
  ASSERT_TRUE(written.ok()) << written.error().message;
  EXPECT_EQ(written->rfind("<bos>", 0), 0u) << *written;
  for (const auto& conv : kConversations)
    if (conv[0].role != "system")
      for (bool gen : {true, false}) expect_same_tokens(tmpl, fam, m->tokenizer(), conv, gen);
  // The template's own raise_exception, as one error that names the fallback.
  auto sys = apply_chat_template(tmpl, fam, m->tokenizer(), kConversations[1], true);
  ASSERT_FALSE(sys.ok());
  EXPECT_NE(sys.error().message.find("System role not supported"), std::string::npos) << sys.error().message;
  EXPECT_NE(sys.error().message.find("--chat-template native"), std::string::npos) << sys.error().message;
}

TEST(ChatPrompt, ABrokenTemplateIsOneErrorAndNativeStillRenders) {
  std::shared_ptr<const Model> m = vocab_of("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!m) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found ($POCKETLLM_MODELS or models/)";
  const std::string broken = "<|im_start|>{% for message in messages %}{{ message['content'] }";
  const ChatFamily fam = detect_chat_family(broken);
  auto r = apply_chat_template(broken, fam, m->tokenizer(), kConversations[0], true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("chat template"), std::string::npos) << r.error().message;
  auto native = apply_chat_template(broken, fam, m->tokenizer(), kConversations[0], true, ChatTemplateMode::native);
  ASSERT_TRUE(native.ok()) << native.error().message;
  EXPECT_NE(native->find("<|im_start|>user\nWhat is the capital of France?<|im_end|>"), std::string::npos) << *native;
}

// Template variables: Qwen3's own template over the Qwen2 vocabulary SmolLM2 shares the ChatML
// markers with; enable_thinking false closes an empty think block, unset or true does not.
TEST(ChatPrompt, TemplateVariablesReachTheTemplate) {
  std::shared_ptr<const Model> m = vocab_of("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!m) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found ($POCKETLLM_MODELS or models/)";
  const fs::path t = fs::path(pllm::test::kSourceDir) / ".." / "shared" / "testdata" / "templates" /
                     "Qwen-Qwen3-0.6B.jinja";
  if (!fs::exists(t)) GTEST_SKIP() << t << " not found (../shared/testdata/templates)";
  std::ifstream in(t);
  const std::string tmpl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const ChatFamily fam = detect_chat_family(tmpl);
  const std::string think = "<think>\n\n</think>";
  auto plain = apply_chat_template(tmpl, fam, m->tokenizer(), kConversations[0], true);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->find(think), std::string::npos) << *plain;
  auto off = apply_chat_template(tmpl, fam, m->tokenizer(), kConversations[0], true, ChatTemplateMode::file,
                                 ChatTemplateVars{{"enable_thinking", false}});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_EQ(*off, *plain + think + "\n\n");
  auto on = apply_chat_template(tmpl, fam, m->tokenizer(), kConversations[0], true, ChatTemplateMode::file,
                                ChatTemplateVars{{"enable_thinking", true}});
  ASSERT_TRUE(on.ok()) << on.error().message;
  EXPECT_EQ(*on, *plain);
  // Not an object, a name the engine sets, not JSON: one error each; the built-in layouts read none.
  for (const char* bad : {"[1]", "{\"messages\": []}", "{\"add_generation_prompt\": false}", "{nope"})
    EXPECT_FALSE(parse_chat_template_vars(bad).ok()) << bad;
  auto native = apply_chat_template(tmpl, fam, m->tokenizer(), kConversations[0], true, ChatTemplateMode::native,
                                    ChatTemplateVars{{"enable_thinking", false}});
  ASSERT_FALSE(native.ok());
  EXPECT_EQ(native.error().code, Status::unsupported) << native.error().message;
}

TEST(ChatPromptModes, WordsRoundTripAndUnknownIsRejected) {
  for (ChatTemplateMode m : {ChatTemplateMode::file, ChatTemplateMode::native})
    EXPECT_EQ(parse_chat_template_mode(chat_template_mode_name(m)), m);
  EXPECT_FALSE(parse_chat_template_mode("jinja").has_value());
}

}  // namespace
