// Methods templates call on values (str.startswith, dict.items, ...), as bound callables.
#pragma once
#include <string>

#include "tokenizer/jinja/value.h"

namespace pllm::jinja {

// The method `name` of obj bound to it, or Undefined when obj has no such (allowed) method:
// jinja2's immutable sandbox refuses the mutating ones (list.append, dict.update, ...).
Value bound_method(const Value& obj, const std::string& name);

}  // namespace pllm::jinja
