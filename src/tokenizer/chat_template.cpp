// Chat template families recognised from the Jinja source, rendered natively.
// The template's leading BOS is not rendered (encode with add_special adds it); later
// BOS/EOS markers inside the conversation are rendered as text (encode them with
// parse_special so they become the special ids).
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cstring>

namespace pllm {

namespace {

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Gemma 4's strip_thinking: every <|channel>...<channel|> span dropped (an unclosed one runs to
// the end of its part), then trimmed.
std::string strip_thinking(const std::string& text) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t close = text.find("<channel|>", at);
    const std::string part = text.substr(at, close == std::string::npos ? std::string::npos : close - at);
    out += part.substr(0, part.find("<|channel>"));
    if (close == std::string::npos) break;
    at = close + std::strlen("<channel|>");
  }
  return trim(out);
}

// A default system prompt written literally in the template: the text between
// `header` (followed by a real or an escaped newline) and `end`, when it holds no
// Jinja expression or quote (so it is plain text, not e.g. message['content']).
std::string literal_after(const std::string& tmpl, const std::string& header, const std::string& end,
                          const std::vector<std::string>& seps) {
  size_t pos = 0;
  while ((pos = tmpl.find(header, pos)) != std::string::npos) {
    pos += header.size();
    for (const std::string& sep : seps) {
      if (tmpl.compare(pos, sep.size(), sep) != 0) continue;
      const size_t start = pos + sep.size();
      const size_t stop = tmpl.find(end, start);
      if (stop == std::string::npos) break;
      std::string text = tmpl.substr(start, stop - start);
      if (text.empty() || text.find_first_of("'\"{}%") != std::string::npos) break;
      // Unescape Jinja string escapes that may appear in the literal.
      std::string out;
      for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          const char n = text[++i];
          out += n == 'n' ? '\n' : n == 't' ? '\t' : n;
        } else {
          out += text[i];
        }
      }
      return out;
    }
  }
  return {};
}

std::string default_system_prompt(ChatFamily f, const std::string& tmpl) {
  switch (f) {
    case ChatFamily::chatml:
      return literal_after(tmpl, "<|im_start|>system", "<|im_end|>", {"\n", "\\n"});
    case ChatFamily::llama3:
      return literal_after(tmpl, "<|start_header_id|>system<|end_header_id|>", "<|eot_id|>",
                           {"\n\n", "\\n\\n"});
    case ChatFamily::zephyr:
      return literal_after(tmpl, "<|system|>", "</s>", {"\n", "\\n"});
    default:
      return {};
  }
}

Result<void> check_roles(const std::vector<ChatMessage>& msgs) {
  for (const auto& m : msgs)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return make_error(Status::invalid_argument, "chat role '" + m.role + "' not supported by this template");
  for (const auto& m : msgs)
    if (!m.tool_calls.empty())  // the tool prompt (constrained/tool_prompt.h) writes them into the content first
      return make_error(Status::invalid_argument, "the built-in layouts do not render tool calls");
  return {};
}

}  // namespace

ChatFamily detect_chat_family(const std::string& t) {
  if (t.empty()) return ChatFamily::chatml;
  if (contains(t, "<|im_start|>")) return ChatFamily::chatml;
  if (contains(t, "<|start_header_id|>")) return ChatFamily::llama3;
  if (contains(t, "<｜User｜>") || contains(t, "<｜Assistant｜>")) return ChatFamily::deepseek_r1;
  if (contains(t, "<start_of_turn>")) return ChatFamily::gemma;
  if (contains(t, "<|turn>")) return ChatFamily::gemma4;
  if (contains(t, "[INST]")) return ChatFamily::llama2;
  if (contains(t, "<|user|>")) return ChatFamily::zephyr;
  return ChatFamily::unknown;
}

const char* chat_family_name(ChatFamily f) {
  switch (f) {
    case ChatFamily::chatml: return "chatml";
    case ChatFamily::llama3: return "llama3";
    case ChatFamily::llama2: return "llama2";
    case ChatFamily::deepseek_r1: return "deepseek-r1";
    case ChatFamily::gemma: return "gemma";
    case ChatFamily::gemma4: return "gemma4";
    case ChatFamily::zephyr: return "zephyr";
    case ChatFamily::unknown: return "unknown";
  }
  return "unknown";
}

Result<std::string> render_chat(ChatFamily family, const std::string& tmpl,
                                const std::vector<ChatMessage>& in, bool add_generation_prompt) {
  std::vector<ChatMessage> msgs = in;
  const std::string dflt = default_system_prompt(family, tmpl);
  if (!dflt.empty() && (msgs.empty() || msgs.front().role != "system"))
    msgs.insert(msgs.begin(), ChatMessage{"system", dflt});

  std::string out;
  switch (family) {
    case ChatFamily::chatml:
      for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;

    case ChatFamily::llama3:
      for (const auto& m : msgs)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;

    case ChatFamily::llama2: {
      // Llama 2 chat: the system prompt wraps into the first user turn.
      PLLM_TRY(check_roles(msgs));
      std::string system;
      size_t first = 0;
      if (!msgs.empty() && msgs[0].role == "system") {
        system = msgs[0].content;
        first = 1;
      }
      for (size_t i = first; i < msgs.size(); ++i) {
        std::string content = msgs[i].content;
        if (i == first && first == 1) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
        if (msgs[i].role == "user") {
          out += (i == first ? "" : "<s>") + std::string("[INST] ") + trim(content) + " [/INST]";
        } else if (msgs[i].role == "assistant") {
          out += " " + trim(content) + " </s>";
        } else {
          return make_error(Status::invalid_argument, "llama2 template: system message after the first turn");
        }
      }
      return out;  // the generation prompt is the trailing "[/INST]"
    }

    case ChatFamily::deepseek_r1: {
      PLLM_TRY(check_roles(msgs));
      std::string system;
      bool first_sys = true;
      for (const auto& m : msgs) {
        if (m.role != "system") continue;
        system += (first_sys ? "" : "\n\n") + m.content;
        first_sys = false;
      }
      out += system;
      for (const auto& m : msgs) {
        if (m.role == "user") {
          out += "<｜User｜>" + m.content;
        } else if (m.role == "assistant") {
          std::string c = m.content;
          const size_t think_end = c.rfind("</think>");
          if (think_end != std::string::npos) c = c.substr(think_end + 8);
          out += "<｜Assistant｜>" + c + "<｜end▁of▁sentence｜>";
        }
      }
      if (add_generation_prompt) {
        out += "<｜Assistant｜>";
        if (contains(tmpl, "<｜Assistant｜><think>\\n") || contains(tmpl, "<｜Assistant｜><think>\n"))
          out += "<think>\n";
      }
      return out;
    }

    case ChatFamily::gemma: {
      // No system role: the system text (plus a blank line) opens the first user turn.
      PLLM_TRY(check_roles(msgs));
      std::string prefix;
      size_t first = 0;
      if (!msgs.empty() && msgs[0].role == "system") {
        prefix = msgs[0].content + "\n\n";
        first = 1;
      }
      for (size_t i = first; i < msgs.size(); ++i) {
        const auto& m = msgs[i];
        if (m.role == "system")
          return make_error(Status::invalid_argument, "gemma template: system message after the first turn");
        out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : "user") + "\n";
        if (i == first) out += prefix;
        out += trim(m.content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      return out;
    }

    case ChatFamily::gemma4: {
      // Gemma 4's template without tools or thinking: a system turn when given; an assistant's
      // text without its thinking channels; the generation prompt closes an empty thought
      // channel (thinking off, the template's default).
      PLLM_TRY(check_roles(msgs));
      std::string prev;
      for (size_t i = 0; i < msgs.size(); ++i) {
        const auto& m = msgs[i];
        if (m.role == "system" && i > 0)
          return make_error(Status::invalid_argument, "gemma4 template: system message after the first turn");
        const bool model = m.role == "assistant";
        // Consecutive assistant messages continue one model turn (the template's rule).
        if (!(model && prev == "assistant")) out += "<|turn>" + std::string(model ? "model" : m.role) + "\n";
        out += model ? strip_thinking(m.content) : trim(m.content);
        out += "<turn|>\n";
        prev = m.role;
      }
      if (add_generation_prompt) out += "<|turn>model\n<|channel>thought\n<channel|>";
      return out;
    }

    case ChatFamily::zephyr: {
      // Zephyr ends turns with EOS ("</s>"); Phi-3's variant of the layout uses "<|end|>".
      std::string end = "</s>";
      for (const char* e : {"<|end|>", "<|endoftext|>"})
        if (contains(tmpl, e)) {
          end = e;
          break;
        }
      for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + end + "\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    }

    case ChatFamily::unknown:
      break;
  }
  return make_error(Status::unsupported, "chat template family not recognised");
}

std::vector<std::string> chat_stop_strings(ChatFamily family) {
  switch (family) {
    case ChatFamily::chatml: return {"<|im_end|>", "<|im_start|>", "<|endoftext|>"};
    case ChatFamily::llama3: return {"<|eot_id|>", "<|eom_id|>", "<|start_header_id|>", "<|end_of_text|>"};
    case ChatFamily::llama2: return {"</s>", "[INST]"};
    case ChatFamily::deepseek_r1: return {"<｜end▁of▁sentence｜>", "<｜User｜>"};
    case ChatFamily::gemma: return {"<end_of_turn>", "<start_of_turn>"};
    case ChatFamily::gemma4: return {"<turn|>", "<|turn>"};
    case ChatFamily::zephyr: return {"</s>", "<|end|>", "<|endoftext|>", "<|user|>"};
    case ChatFamily::unknown: break;
  }
  return {};
}

}  // namespace pllm
