// Jinja parser: tokens to a syntax tree, with jinja2's operator precedence.
#pragma once
#include <string>

#include "tokenizer/jinja/ast.h"

namespace pllm::jinja {

// Nesting deeper than this (blocks or expressions) is an error, not a stack overflow.
constexpr int kMaxParseDepth = 200;

// Throws TemplateError with the line of the first syntax error.
Body parse(const std::string& source);

}  // namespace pllm::jinja
