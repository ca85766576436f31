// Tool calls on outside input. The first byte picks a format and what the rest is:
//  * even: the rest is a `tools` list (JSON): definitions are checked, and those that pass compile
//    to a grammar (an error or a grammar, never a crash; a compiled grammar always parses);
//  * odd: the rest is a model's reply: it parses whole and streamed in uneven pieces, and both
//    give the same calls (the stream is the whole parse fed in parts).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "constrained/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const pllm::ToolCallFormat formats[] = {pllm::ToolCallFormat::hermes, pllm::ToolCallFormat::llama3_json,
                                          pllm::ToolCallFormat::pythonic, pllm::ToolCallFormat::phi4};
  const pllm::ToolCallFormat f = formats[(data[0] >> 1) % 4];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    auto json = nlohmann::ordered_json::parse(rest, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return 0;
    auto tools = pllm::parse_tool_definitions(json);
    if (!tools.ok()) {
      if (tools.error().message.empty()) std::abort();
      return 0;
    }
    for (auto mode : {pllm::ToolChoiceMode::automatic, pllm::ToolChoiceMode::required}) {
      auto g = pllm::tool_call_grammar(f, *tools, {mode, ""}, (data[0] & 8) != 0);
      if (!g.ok() && g.error().message.empty()) std::abort();
    }
    return 0;
  }
  const pllm::ToolReply whole = pllm::parse_tool_reply(f, rest, "c");
  pllm::ToolCallStream s(f, "c");
  size_t step = 1 + (data[0] >> 3);
  for (size_t i = 0; i < rest.size(); i += step, step = step % 7 + 1) (void)s.push(rest.substr(i, step));
  (void)s.finish();
  if (s.calls().size() != whole.calls.size()) std::abort();
  for (size_t i = 0; i < whole.calls.size(); ++i)
    if (s.calls()[i].name != whole.calls[i].name || s.calls()[i].arguments != whole.calls[i].arguments) std::abort();
  return 0;
}
