// The Jinja interpreter on outside template text (a GGUF's tokenizer.chat_template): every
// input renders or fails with one error, within the limits (no crash, hang, or runaway memory).
// Input: the template text; the variables are a fixed conversation with a tool call, a tool
// result and a tools list, so the seeds (real chat templates) reach their deep branches.
#include <cstdint>
#include <string>

#include "tokenizer/jinja/render.h"

namespace {

const nlohmann::ordered_json& variables() {
  static const auto vars = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Sys."},
      {"role": "user", "content": "hi \u00e9 <tool_response>"},
      {"role": "assistant", "content": "<think>a</think>b", "reasoning_content": "r",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": {"x": [1, 2.5, null, true]}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": 1}"},
      {"role": "user", "content": [{"type": "text", "text": "part"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "number"}}},
                              "required": ["x"]}}}],
    "documents": [{"title": "t", "text": "x"}],
    "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"})");
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  pllm::jinja::Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 100000;
  (void)pllm::render_template(source, variables(), 0, limits);
  return 0;
}
