// Methods templates call on values (str.startswith, dict.items, ...), as bound callables.
#pragma once
#include <string>

#include "tokenizer/jinja/value.h"

namespace pllm::jinja {

class Interpreter;

// The method `name` of obj bound to it, or Undefined when obj has no such (allowed) method:
// jinja2's immutable sandbox refuses the mutating ones (list.append, dict.update, ...).
Value bound_method(const Value& obj, const std::string& name);

// Shared with the filters.
const std::string& need_string(const Value& v, const std::string& what);  // fails unless a string
std::string py_lower(const std::string& s);
std::string py_upper(const std::string& s);
std::string capitalize(const std::string& s);
// str.replace(from, to, count) (count < 0: all); `in` (may be null) bounds the result's size.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                        Interpreter* in);
Value dict_method(const Value& self, const std::string& name, const Args& args);  // get, items, keys, values
std::string percent_format(const std::string& fmt, const ValueList& args);       // Python's str % args

}  // namespace pllm::jinja
