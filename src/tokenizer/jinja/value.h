// The values a Jinja template computes with, modelled on the Python objects jinja2 sees when
// Hugging Face renders a chat template: None, bool, int, float, str, list, dict (insertion
// order), callables (macros, globals, bound methods), namespace() objects and Undefined.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace pllm::jinja {

// Raised inside the interpreter only; render_template() turns it into a Result error.
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& message);

// Bytes of the strings and list slots made on this thread since the interpreter last reset it:
// what bounds a render's memory and time together (Limits::max_built_bytes).
size_t& built_bytes();

struct Value;
using ValueList = std::vector<Value>;
struct ValueDict;
struct Namespace;
struct Callable;
struct Args;

// A missing variable, attribute or item; `hint` names what was missing for the error message.
struct Undefined {
  std::string hint;
};
struct None {};

struct Value {
  using List = std::shared_ptr<const ValueList>;
  using Dict = std::shared_ptr<const ValueDict>;
  using Str = std::shared_ptr<const std::string>;  // shared: copying a value never copies its text
  std::variant<Undefined, None, bool, int64_t, double, Str, List, Dict, std::shared_ptr<Callable>,
               std::shared_ptr<Namespace>>
      v;
  bool tuple = false;  // a list that Python would hold as a tuple: printed as (a, b)

  static Value undefined(std::string hint = {}) { return Value{Undefined{std::move(hint)}}; }
  static Value none() { return Value{None{}}; }
  static Value boolean(bool b) { return Value{b}; }
  static Value integer(int64_t i) { return Value{i}; }
  static Value floating(double d) { return Value{d}; }
  static Value string(std::string s);
  static Value list(ValueList items);
  static Value tuple_of(ValueList items);
  static Value dict(ValueDict d);

  bool is_undefined() const { return v.index() == 0; }
  bool is_none() const { return v.index() == 1; }
  bool is_bool() const { return v.index() == 2; }
  bool is_int() const { return v.index() == 3; }
  bool is_float() const { return v.index() == 4; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return v.index() == 5; }
  bool is_list() const { return v.index() == 6; }
  bool is_dict() const { return v.index() == 7; }
  bool is_callable() const { return v.index() == 8; }
  bool is_namespace() const { return v.index() == 9; }

  bool as_bool() const { return std::get<2>(v); }
  int64_t as_int() const { return std::get<3>(v); }
  double as_float() const { return std::get<4>(v); }
  const std::string& as_string() const { return *std::get<5>(v); }
  const ValueList& as_list() const { return *std::get<6>(v); }
  const ValueDict& as_dict() const { return *std::get<7>(v); }
  const Callable& as_callable() const { return *std::get<8>(v); }
  Namespace& as_namespace() const { return *std::get<9>(v); }
  const std::string& undefined_hint() const { return std::get<0>(v).hint; }
  double to_double() const;  // a number as a double (bool counts as 0/1, as in Python)
};

struct ValueDict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct Namespace {
  ValueDict attrs;
};

// Arguments of a call: positional, then keyword.
struct Args {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `index` or named `name`, or Undefined when neither was given.
  const Value* get(size_t index, const char* name) const;
};

class Interpreter;
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, const Args&)> fn;
};

// Python semantics, as jinja2 applies them.
bool truthy(const Value& v);
std::string type_name(const Value& v);        // Python's type name, for error messages
std::string to_str(const Value& v);           // str(v); Undefined is ""
std::string to_repr(const Value& v);          // repr(v), as str() prints list items
std::string float_repr(double d);             // Python's repr of a float
bool equals(const Value& a, const Value& b);  // Python ==
int compare(const Value& a, const Value& b, const char* op);  // <0, 0, >0; fails where Python raises
size_t length_of(const Value& v);             // len(v); Undefined is 0

// The Python whitespace set (str.isspace) on UTF-8 text, and the helpers built on it.
size_t space_len_at(const std::string& s, size_t pos);  // bytes of the whitespace char at pos, 0 if none
std::string strip_spaces(const std::string& s, bool left, bool right);
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);
std::vector<uint32_t> to_code_points(const std::string& s);
std::string from_code_points(const uint32_t* cps, size_t n);
void append_utf8(std::string& out, uint32_t cp);
uint32_t upper_cp(uint32_t cp);
uint32_t lower_cp(uint32_t cp);
bool is_alpha_cp(uint32_t cp);  // has a case (approximates str.isalpha for the scripts upper_cp knows)

}  // namespace pllm::jinja
