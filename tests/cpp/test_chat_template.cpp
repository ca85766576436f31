// Chat templates: family detection and rendering against the families' documented
// prompt formats (written out by hand below, not produced by the renderer).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "gguf/gguf.h"
#include "tokenizer/chat_template.h"
#include "test_paths.h"

using namespace pllm;
namespace fs = std::filesystem;

namespace {

// SmolLM2-Instruct's template (as stored in its GGUF).
const std::string kSmolTmpl =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";
// Plain ChatML without a default system prompt.
const std::string kChatmlTmpl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const std::string kLlama3Tmpl =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
const std::string kR1Tmpl =
    "{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == "
    "'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == "
    "'assistant' %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- "
    "endfor -%}{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}";
const std::string kGemmaTmpl =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set "
    "role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + "
    "role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if "
    "add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";
const std::string kLlama2Tmpl =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}"
    "{% endif %}{% for message in loop_messages %}{% if message['role'] == 'user' %}{{ bos_token "
    "+ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' "
    " + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const std::string kZephyrTmpl =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' "
    "+ message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ "
    "'<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and "
    "add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
const std::string kPhi3Tmpl =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' "
    "+ '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif "
    "(message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% "
    "endfor %}";

std::string render(const std::string& tmpl, const std::vector<ChatMessage>& msgs, bool gen = true) {
  auto r = render_chat(detect_chat_family(tmpl), tmpl, msgs, gen);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::string();
}

TEST(ChatTemplate, DetectsFamilies) {
  EXPECT_EQ(detect_chat_family(""), ChatFamily::chatml);
  EXPECT_EQ(detect_chat_family(kSmolTmpl), ChatFamily::chatml);
  EXPECT_EQ(detect_chat_family(kLlama3Tmpl), ChatFamily::llama3);
  EXPECT_EQ(detect_chat_family(kR1Tmpl), ChatFamily::deepseek_r1);
  EXPECT_EQ(detect_chat_family(kGemmaTmpl), ChatFamily::gemma);
  EXPECT_EQ(detect_chat_family(kLlama2Tmpl), ChatFamily::llama2);
  EXPECT_EQ(detect_chat_family(kZephyrTmpl), ChatFamily::zephyr);
  EXPECT_EQ(detect_chat_family(kPhi3Tmpl), ChatFamily::zephyr);
  EXPECT_EQ(detect_chat_family("{{ messages }}"), ChatFamily::unknown);
  EXPECT_STREQ(chat_family_name(ChatFamily::gemma), "gemma");
}

TEST(ChatTemplate, SmolLM2DefaultSystemPrompt) {
  EXPECT_EQ(render(kSmolTmpl, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // An explicit system message replaces the default.
  EXPECT_EQ(render(kSmolTmpl, {{"system", "Be brief."}, {"user", "Hi"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, PlainChatmlHasNoDefault) {
  EXPECT_EQ(render(kChatmlTmpl, {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("", {{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render(kLlama3Tmpl, {{"system", "You are X."}, {"user", " Hi \n"}}),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are X.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, DeepSeekR1) {
  EXPECT_EQ(render(kR1Tmpl, {{"system", "Be brief."}, {"user", "Hi"}}),
            "Be brief.<｜User｜>Hi<｜Assistant｜><think>\n");
  // Reasoning is dropped from earlier assistant turns.
  EXPECT_EQ(render(kR1Tmpl, {{"user", "Hi"}, {"assistant", "<think>hmm</think>Hello"}, {"user", "Bye"}},
                   false),
            "<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜><｜User｜>Bye");
}

TEST(ChatTemplate, GemmaFoldsSystemIntoFirstUserTurn) {
  EXPECT_EQ(render(kGemmaTmpl, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
}

// Gemma 4: the expected text is what its own template (google-gemma-4-31B-it.jinja, through
// `pocketllm template`, equal to jinja2's render in test_chat_templates.py) writes after its BOS.
TEST(ChatTemplate, Gemma4MatchesItsTemplatesLayout) {
  const std::string tmpl = "{{ bos_token }}{% if x %}<|turn>system\n{% endif %}<|turn>model\n";
  EXPECT_EQ(detect_chat_family(tmpl), ChatFamily::gemma4);
  EXPECT_STREQ(chat_family_name(ChatFamily::gemma4), "gemma4");
  auto r = render_chat(ChatFamily::gemma4, tmpl,
                       {{"system", " Be brief. "}, {"user", "Hi there "},
                        {"assistant", "<|channel>thought\nhmm<channel|> Hello! "}, {"user", "Capital of France?"}},
                       true);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi there<turn|>\n<|turn>model\nHello!<turn|>\n"
                "<|turn>user\nCapital of France?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_FALSE(render_chat(ChatFamily::gemma4, tmpl, {{"user", "a"}, {"system", "b"}}, true).ok());
  const auto stops = chat_stop_strings(ChatFamily::gemma4);
  EXPECT_NE(std::find(stops.begin(), stops.end(), "<turn|>"), stops.end());
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(render(kLlama2Tmpl, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "More"}}),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] More [/INST]");
}

TEST(ChatTemplate, ZephyrAndPhi3) {
  EXPECT_EQ(render(kZephyrTmpl, {{"system", "Be brief."}, {"user", "Hi"}}),
            "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  EXPECT_EQ(render(kPhi3Tmpl, {{"user", "Hi"}}), "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, StopStringsAndErrors) {
  auto has = [](ChatFamily f, const std::string& s) {
    const auto v = chat_stop_strings(f);
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_TRUE(has(ChatFamily::chatml, "<|im_end|>"));
  EXPECT_TRUE(has(ChatFamily::llama3, "<|eot_id|>"));
  EXPECT_TRUE(has(ChatFamily::gemma, "<end_of_turn>"));
  EXPECT_TRUE(has(ChatFamily::deepseek_r1, "<｜end▁of▁sentence｜>"));
  EXPECT_TRUE(has(ChatFamily::llama2, "</s>"));
  EXPECT_TRUE(has(ChatFamily::zephyr, "</s>"));
  EXPECT_FALSE(render_chat(ChatFamily::unknown, "{{ x }}", {{"user", "Hi"}}, true).ok());
  EXPECT_FALSE(render_chat(ChatFamily::gemma, kGemmaTmpl, {{"tool", "x"}}, true).ok());
}

TEST(ChatTemplate, SmolLM2FromModelFile) {
  const char* name = "SmolLM2-135M-Instruct.Q4_1.gguf";
  fs::path p = fs::path(pllm::test::kSourceDir) / "models" / name;
  if (const char* env = std::getenv("POCKETLLM_MODELS"); env && fs::exists(fs::path(env) / name))
    p = fs::path(env) / name;
  if (!fs::exists(p)) GTEST_SKIP() << name << " not found ($POCKETLLM_MODELS or models/)";
  auto f = GgufFile::open(p.string());
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto tmpl = (*f)->get_string("tokenizer.chat_template");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  EXPECT_EQ(detect_chat_family(*tmpl), ChatFamily::chatml);
  EXPECT_EQ(render(*tmpl, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
