// Renders a parsed Jinja template: statements, expressions, scopes (a for loop's body is a new
// scope each iteration, a macro's body sees the template's top level), with limits that turn a
// runaway template into one error.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/jinja/ast.h"

namespace pllm::jinja {

struct Limits {
  size_t max_output_bytes = 8u << 20;     // the rendered text, and any one string built on the way
  size_t max_loop_iterations = 1u << 20;  // all loops of one render together
  int max_call_depth = 64;                // nested macro calls (recursion)
  size_t max_built_bytes = 256u << 20;    // all strings and lists made during the render together
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, ValueDict globals);
  // Throws TemplateError.
  std::string render(const Body& body);

  Value eval(const Expr& e);
  Value call(const Value& callee, const Args& args);
  const Limits& limits() const { return limits_; }
  // Fails when a string about to be built would pass the output limit.
  void check_size(size_t bytes) const;
  // Counts loop iterations (filters that loop count too).
  void count_iterations(size_t n);

 private:
  enum class Flow { normal, break_, continue_ };
  using Frame = std::unordered_map<std::string, Value>;

  Flow exec_body(const Body& body);
  Flow exec(const Node& n);
  Flow exec_for(const Node& n);
  void exec_set(const Node& n);
  std::string capture(const Body& body);
  Value make_macro(const Node& n, bool is_caller);
  Value call_macro(const Node& n, const Args& args);
  void write(const std::string& s);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  Value eval_binary(const Expr& e);
  Value eval_call(const Expr& e);
  Args eval_args(const Expr& e);

  Limits limits_;
  std::vector<std::shared_ptr<Frame>> frames_;  // innermost last; frames_[0] is the top level
  std::string* out_ = nullptr;
  size_t iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
};

// Filters, tests, attribute and item access (builtins.cpp).
Value apply_filter(Interpreter& in, const std::string& name, const Value& v, const Args& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, const Args& args);
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
ValueList iterate(const Value& v);
Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b);
ValueDict builtin_globals();

}  // namespace pllm::jinja
