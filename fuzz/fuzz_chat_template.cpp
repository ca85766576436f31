// Chat-template rendering with outside text: the template source (from a GGUF's
// tokenizer.chat_template) and the messages (roles and contents from a client). Every family
// renders every input, not only the family the template is detected as: the default system
// prompt is read from the template text whatever the family.
// Input: the template, then NUL-separated role / content pairs; with no pair, a fixed
// conversation. So a seed is a template as plain text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

using namespace pllm;

namespace {

constexpr ChatFamily kFamilies[] = {ChatFamily::chatml, ChatFamily::llama3, ChatFamily::llama2,
                                    ChatFamily::deepseek_r1, ChatFamily::gemma, ChatFamily::zephyr,
                                    ChatFamily::unknown};

std::vector<std::string> split_nul(std::string_view s) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t nul = s.find('\0', pos);
    parts.emplace_back(s.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos));
    if (nul == std::string_view::npos) return parts;
    pos = nul + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = split_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string& tmpl = parts[0];
  std::vector<ChatMessage> msgs;
  for (size_t i = 1; i + 1 < parts.size(); i += 2) msgs.push_back({parts[i], parts[i + 1]});
  if (parts.size() == 1)
    msgs = {{"system", "You are terse."}, {"user", "  Hi  "}, {"assistant", "<think>x</think> Hello"},
            {"user", "Again?"}};

  const ChatFamily detected = detect_chat_family(tmpl);
  (void)chat_family_name(detected);
  (void)chat_stop_strings(detected);
  for (const ChatFamily f : kFamilies)
    for (const bool gen : {false, true}) (void)render_chat(f, tmpl, msgs, gen);
  return 0;
}
