#include "tokenizer/jinja/interpreter.h"

#include <cstdint>

namespace pllm::jinja {

namespace {

// Expressions nest no deeper than the parser allows, but macro bodies evaluate expressions too.
constexpr int kMaxEvalDepth = 2000;

struct DepthGuard {
  DepthGuard(int* depth, int max, const char* what) : depth_(depth) {
    if (++*depth_ > max) fail(std::string(what) + " nested too deeply (limit " + std::to_string(max) + ")");
  }
  ~DepthGuard() { --*depth_; }
  int* depth_;
};

std::string undefined_message(const Value& v) {
  return v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint();
}

}  // namespace

Interpreter::Interpreter(const Limits& limits, ValueDict globals) : limits_(limits) {
  built_bytes() = 0;
  auto top = std::make_shared<Frame>();
  for (auto& [k, v] : builtin_globals().items) (*top)[k] = v;
  for (auto& [k, v] : globals.items) (*top)[k] = std::move(v);
  frames_.push_back(std::move(top));
}

std::string Interpreter::render(const Body& body) {
  std::string out;
  out_ = &out;
  exec_body(body);
  out_ = nullptr;
  return out;
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    fail("output too large (limit " + std::to_string(limits_.max_output_bytes) + " bytes)");
}

void Interpreter::count_iterations(size_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    fail("too many loop iterations (limit " + std::to_string(limits_.max_loop_iterations) + ")");
}

void Interpreter::write(const std::string& s) {
  check_size(out_->size() + s.size());
  *out_ += s;
}

Value Interpreter::lookup(const std::string& name) const {
  for (size_t i = frames_.size(); i-- > 0;) {
    auto it = frames_[i]->find(name);
    if (it != frames_[i]->end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::string& name, Value v) { (*frames_.back())[name] = std::move(v); }

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& n : body) {
    const Flow f = exec(*n);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Interpreter::capture(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Interpreter::Flow Interpreter::exec(const Node& n) {
  switch (n.kind) {
    case Node::data:
      write(n.text);
      return Flow::normal;
    case Node::output:
      write(to_str(eval(*n.expr)));
      return Flow::normal;
    case Node::if_:
      return exec_body(truthy(eval(*n.expr)) ? n.body : n.else_body);
    case Node::for_:
      return exec_for(n);
    case Node::set:
      exec_set(n);
      return Flow::normal;
    case Node::set_block: {
      Value v = Value::string(capture(n.body));
      if (n.expr) v = apply_filter(*this, n.expr->name, v, eval_args(*n.expr));
      assign(n.targets[0], std::move(v));
      return Flow::normal;
    }
    case Node::macro:
      assign(n.text, make_macro(n, false));
      return Flow::normal;
    case Node::call_block: {
      const Expr& call_expr = *n.expr;
      Value callee = eval(*call_expr.a);
      Args args = eval_args(call_expr);
      args.keyword.emplace_back("caller", make_macro(n, true));
      write(to_str(call(callee, args)));
      return Flow::normal;
    }
    case Node::filter_block: {
      Value v = Value::string(capture(n.body));
      // the chain was parsed onto a placeholder literal: apply it from the innermost filter out
      std::vector<const Expr*> chain;
      for (const Expr* e = n.expr.get(); e && e->kind == Expr::filter; e = e->a.get()) chain.push_back(e);
      for (size_t i = chain.size(); i-- > 0;) v = apply_filter(*this, chain[i]->name, v, eval_args(*chain[i]));
      write(to_str(v));
      return Flow::normal;
    }
    case Node::break_:
      return Flow::break_;
    case Node::continue_:
      return Flow::continue_;
    case Node::scope: {  // HF renders {% generation %} as a call block: its sets stay inside
      frames_.push_back(std::make_shared<Frame>());
      Flow f;
      try {
        f = exec_body(n.body);
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
      return f;
    }
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec_for(const Node& n) {
  ValueList items = iterate(eval(*n.expr));
  auto bind = [&](Frame& frame, const Value& item) {
    if (n.targets.size() == 1) {
      frame[n.targets[0]] = item;
      return;
    }
    ValueList parts = iterate(item);
    if (parts.size() != n.targets.size())
      fail("line " + std::to_string(n.line) + ": cannot unpack " + std::to_string(parts.size()) + " values into " +
           std::to_string(n.targets.size()) + " names");
    for (size_t k = 0; k < parts.size(); ++k) frame[n.targets[k]] = parts[k];
  };
  if (n.cond) {  // `for x in xs if cond`: the loop (and loop.length) sees only the kept items
    ValueList kept;
    for (const auto& item : items) {
      count_iterations(1);
      auto frame = std::make_shared<Frame>();
      bind(*frame, item);
      frames_.push_back(frame);
      bool keep = false;
      try {
        keep = truthy(eval(*n.cond));
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(n.else_body);
  const auto len = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < len; ++i) {
    count_iterations(1);
    ValueDict loop;
    loop.set("index0", Value::integer(i));
    loop.set("index", Value::integer(i + 1));
    loop.set("revindex0", Value::integer(len - i - 1));
    loop.set("revindex", Value::integer(len - i));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == len - 1));
    loop.set("length", Value::integer(len));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < len ? items[i + 1] : Value::undefined("there is no next item"));
    auto cycle = std::make_shared<Callable>();
    cycle->name = "cycle";
    cycle->fn = [i](Interpreter&, const Args& args) {
      if (args.positional.empty()) fail("loop.cycle() needs at least one item");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    };
    loop.set("cycle", Value{cycle});
    auto frame = std::make_shared<Frame>();
    (*frame)["loop"] = Value::dict(std::move(loop));
    bind(*frame, items[i]);
    frames_.push_back(frame);
    Flow f;
    try {
      f = exec_body(n.body);
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    frames_.pop_back();
    if (f == Flow::break_) break;
  }
  return Flow::normal;
}

void Interpreter::exec_set(const Node& n) {
  Value v = eval(*n.expr);
  if (!n.attr.empty()) {
    Value ns = lookup(n.targets[0]);
    if (!ns.is_namespace())
      fail("line " + std::to_string(n.line) + ": cannot assign attribute on non-namespace object '" + n.targets[0] + "'");
    ns.as_namespace().attrs.set(n.attr, std::move(v));
    return;
  }
  if (n.targets.size() == 1) {
    assign(n.targets[0], std::move(v));
    return;
  }
  ValueList parts = iterate(v);
  if (parts.size() != n.targets.size())
    fail("line " + std::to_string(n.line) + ": cannot unpack " + std::to_string(parts.size()) + " values into " +
         std::to_string(n.targets.size()) + " names");
  for (size_t k = 0; k < parts.size(); ++k) assign(n.targets[k], parts[k]);
}

// A macro, or the body of a {% call %} block (its node holds the block's parameters and body),
// callable as `caller(...)` from the macro it calls.
Value Interpreter::make_macro(const Node& n, bool is_caller) {
  auto c = std::make_shared<Callable>();
  c->name = is_caller ? "caller" : n.text;
  const Node* node = &n;
  c->fn = [node](Interpreter& in, const Args& args) { return in.call_macro(*node, args); };
  return Value{c};
}

Value Interpreter::call_macro(const Node& n, const Args& args) {
  DepthGuard guard(&call_depth_, limits_.max_call_depth, "macro calls");
  const std::string& name = n.kind == Node::macro ? n.text : std::string("caller");
  if (args.positional.size() > n.params.size())
    fail("macro '" + name + "' takes not more than " + std::to_string(n.params.size()) + " argument(s)");
  auto frame = std::make_shared<Frame>();
  std::vector<std::shared_ptr<Frame>> saved = {frames_[0], frame};
  std::swap(saved, frames_);
  try {
    for (const auto& [key, value] : args.keyword) {
      bool known = key == "caller";
      for (const auto& p : n.params) known = known || p.name == key;
      if (!known) fail("macro '" + name + "' takes no keyword argument '" + key + "'");
      (*frame)[key] = value;
    }
    for (size_t i = 0; i < n.params.size(); ++i) {
      const auto& p = n.params[i];
      if (i < args.positional.size()) {
        (*frame)[p.name] = args.positional[i];
      } else if (!frame->count(p.name)) {
        (*frame)[p.name] = p.default_value ? eval(*p.default_value)
                                           : Value::undefined("parameter '" + p.name + "' was not provided");
      }
    }
    std::string text = capture(n.body);
    std::swap(saved, frames_);
    return Value::string(std::move(text));
  } catch (...) {
    std::swap(saved, frames_);
    throw;
  }
}

Value Interpreter::call(const Value& callee, const Args& args) {
  if (callee.is_undefined()) fail(undefined_message(callee));
  if (!callee.is_callable()) fail("'" + type_name(callee) + "' object is not callable");
  return callee.as_callable().fn(*this, args);
}

Args Interpreter::eval_args(const Expr& e) {
  Args args;
  for (const auto& a : e.args) args.positional.push_back(eval(*a));
  for (const auto& [k, a] : e.kwargs) args.keyword.emplace_back(k, eval(*a));
  return args;
}

Value Interpreter::eval_call(const Expr& e) {
  Value callee = eval(*e.a);
  return call(callee, eval_args(e));
}

Value Interpreter::eval_binary(const Expr& e) {
  if (e.name == "and") {
    Value l = eval(*e.a);
    return truthy(l) ? eval(*e.b) : l;
  }
  if (e.name == "or") {
    Value l = eval(*e.a);
    return truthy(l) ? l : eval(*e.b);
  }
  Value l = eval(*e.a);
  Value r = eval(*e.b);
  return binary_op(*this, e.name, l, r);
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(&eval_depth_, kMaxEvalDepth, "expressions");
  if (built_bytes() > limits_.max_built_bytes)
    fail("the template built too much text (limit " + std::to_string(limits_.max_built_bytes) + " bytes)");
  switch (e.kind) {
    case Expr::literal:
      return e.value;
    case Expr::variable:
      return lookup(e.name);
    case Expr::list: {
      ValueList items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return e.is_tuple ? Value::tuple_of(std::move(items)) : Value::list(std::move(items));
    }
    case Expr::dict: {
      ValueDict d;
      for (size_t i = 0; i < e.keys.size(); ++i) {
        Value k = eval(*e.keys[i]);
        if (!k.is_string()) fail("line " + std::to_string(e.line) + ": only string keys are supported in dict literals");
        d.set(k.as_string(), eval(*e.args[i]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::attr: {
      Value obj = eval(*e.a);
      if (obj.is_undefined()) fail(undefined_message(obj));
      return get_attr(obj, e.name);
    }
    case Expr::item: {
      Value obj = eval(*e.a);
      if (obj.is_undefined()) fail(undefined_message(obj));
      return get_item(obj, eval(*e.b));
    }
    case Expr::slice: {
      Value obj = eval(*e.a);
      if (obj.is_undefined()) fail(undefined_message(obj));
      auto opt = [&](const ExprPtr& x) { return x ? eval(*x) : Value::none(); };
      return get_slice(obj, opt(e.b), opt(e.c), opt(e.args[0]));
    }
    case Expr::call:
      return eval_call(e);
    case Expr::filter:
      return apply_filter(*this, e.name, eval(*e.a), eval_args(e));
    case Expr::test: {
      const bool r = apply_test(*this, e.name, eval(*e.a), eval_args(e));
      return Value::boolean(e.negated ? !r : r);
    }
    case Expr::unary: {
      Value v = eval(*e.a);
      if (e.name == "not") return Value::boolean(!truthy(v));
      if (v.is_undefined()) fail(undefined_message(v));
      if (!v.is_number()) fail("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      if (e.name == "+") return v.is_bool() ? Value::integer(v.as_bool()) : v;
      if (v.is_float()) return Value::floating(-v.as_float());
      const int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
      if (i == INT64_MIN) fail("integer overflow");
      return Value::integer(-i);
    }
    case Expr::binary:
      return eval_binary(e);
    case Expr::cond:
      if (truthy(eval(*e.a))) return eval(*e.b);
      return e.c ? eval(*e.c) : Value::undefined("the conditional expression had no else branch");
  }
  return Value::undefined();
}

}  // namespace pllm::jinja
