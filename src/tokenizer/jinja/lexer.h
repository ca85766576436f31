// Jinja lexer: template text and the tokens inside {{ }} and {% %}, with the whitespace
// control Hugging Face renders chat templates with (trim_blocks and lstrip_blocks on,
// `-` and `+` markers, one trailing newline dropped, line endings normalised to \n).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pllm::jinja {

enum class Tok { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };

struct Token {
  Tok kind = Tok::eof;
  std::string text;  // text, name, string value (unescaped) or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateError on an unterminated tag, comment or string, or an unknown character.
std::vector<Token> lex(const std::string& source);

}  // namespace pllm::jinja
