// Operators, attribute/item access, methods of str/dict/list, tests and the global functions
// (range, dict, namespace), with Python's and jinja2's semantics.
#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdint>
#include <functional>
#include <optional>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/methods.h"

namespace pllm::jinja {

namespace {

[[noreturn]] void fail_undefined(const Value& v) {
  fail(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

int64_t as_i64(const Value& v) { return v.is_bool() ? v.as_bool() : v.as_int(); }
bool is_integral(const Value& v) { return v.is_bool() || v.is_int(); }

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) fail("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::string("") : Value::list({});
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > in.limits().max_output_bytes / s.size() + 1)
      in.check_size(SIZE_MAX);
    in.check_size(s.size() * static_cast<size_t>(n));
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::string(std::move(out));
  }
  const auto& items = seq.as_list();
  if (!items.empty()) {
    if (static_cast<uint64_t>(n) > in.limits().max_loop_iterations) in.count_iterations(in.limits().max_loop_iterations + 1);
    in.count_iterations(static_cast<size_t>(n) * items.size());
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      fail("'in <string>' requires string as left operand, not " + type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const auto& x : container.as_list())
      if (equals(x, item)) return true;
    return false;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  if (container.is_undefined()) return false;  // iterating Undefined yields nothing
  fail("argument of type '" + type_name(container) + "' is not iterable");
}

}  // namespace

Value binary_op(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value::boolean(equals(a, b));
  if (op == "!=") return Value::boolean(!equals(a, b));
  if (op == "<") return Value::boolean(compare(a, b, "<") < 0);
  if (op == "<=") return Value::boolean(compare(a, b, "<=") <= 0);
  if (op == ">") return Value::boolean(compare(a, b, ">") > 0);
  if (op == ">=") return Value::boolean(compare(a, b, ">=") >= 0);
  if (op == "in") return Value::boolean(contains(b, a));
  if (op == "not in") return Value::boolean(!contains(b, a));
  if (op == "~") {
    std::string s = to_str(a);
    const std::string t = to_str(b);
    in.check_size(s.size() + t.size());
    return Value::string(s + t);
  }
  const bool ints = is_integral(a) && is_integral(b);
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_add_overflow(as_i64(a), as_i64(b), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.to_double() + b.to_double());
    if (a.is_string() && b.is_string()) {
      in.check_size(a.as_string().size() + b.as_string().size());
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      ValueList out = a.as_list();
      in.count_iterations(b.as_list().size());
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out));
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_sub_overflow(as_i64(a), as_i64(b), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.to_double() - b.to_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_mul_overflow(as_i64(a), as_i64(b), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.to_double() * b.to_double());
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(in, a, as_i64(b));
    if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(in, b, as_i64(a));
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.to_double() == 0) fail("division by zero");
    return Value::floating(a.to_double() / b.to_double());
  }
  if (op == "%" && a.is_string()) return Value::string(percent_format(a.as_string(), b.is_list() && b.tuple ? b.as_list() : ValueList{b}));
  if (op == "//" || op == "%") {
    if (ints) {
      const int64_t x = as_i64(a), y = as_i64(b);
      const int64_t q = floor_div(x, y);
      return Value::integer(op == "//" ? q : x - q * y);
    }
    if (!nums) unsupported(op, a, b);
    const double x = a.to_double(), y = b.to_double();
    if (y == 0) fail("float division by zero");
    const double q = std::floor(x / y);
    return Value::floating(op == "//" ? q : x - q * y);
  }
  if (op == "**") {
    if (ints && as_i64(b) >= 0) {  // by squaring; |base| <= 1 never overflows
      int64_t r = 1, base = as_i64(a);
      for (int64_t e = as_i64(b); e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(r, base, &r)) fail("integer overflow");
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
          if (r == 0) break;
          fail("integer overflow");
        }
      }
      return Value::integer(r);
    }
    if (!nums) unsupported("**", a, b);
    return Value::floating(std::pow(a.to_double(), b.to_double()));
  }
  fail("unknown operator " + op);
}

ValueList iterate(const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_undefined()) return {};
  if (v.is_dict()) {
    ValueList keys;
    for (const auto& [k, x] : v.as_dict().items) keys.push_back(Value::string(k));
    return keys;
  }
  if (v.is_string()) {
    ValueList chars;
    for (uint32_t cp : to_code_points(v.as_string())) chars.push_back(Value::string(from_code_points(&cp, 1)));
    return chars;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_namespace()) {
    const Value* v = obj.as_namespace().attrs.find(name);
    return v ? *v : Value::undefined("'Namespace' object has no attribute '" + name + "'");
  }
  if (Value m = bound_method(obj, name); !m.is_undefined()) return m;
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    if (v) return *v;
  }
  return Value::undefined("'" + type_name(obj) + "' object has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
      if (Value m = bound_method(obj, key.as_string()); !m.is_undefined()) return m;
    }
    return Value::undefined("'dict object' has no attribute '" + to_str(key) + "'");
  }
  if ((obj.is_list() || obj.is_string()) && is_integral(key)) {
    int64_t i = as_i64(key);
    if (obj.is_list()) {
      const auto& items = obj.as_list();
      const auto n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("list index out of range");
      return items[static_cast<size_t>(i)];
    }
    const auto cps = to_code_points(obj.as_string());
    const auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("string index out of range");
    return Value::string(from_code_points(&cps[static_cast<size_t>(i)], 1));
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined("'" + type_name(obj) + "' object has no item " + to_str(key));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto idx = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!is_integral(v)) fail(std::string("slice ") + what + " must be an integer or None");
    return as_i64(v);
  };
  const auto st = idx(step, "step");
  const int64_t k = st.value_or(1);
  if (k == 0) fail("slice step cannot be zero");
  std::vector<uint32_t> cps;
  const ValueList* items = nullptr;
  if (obj.is_string()) {
    cps = to_code_points(obj.as_string());
  } else if (obj.is_list()) {
    items = &obj.as_list();
  } else {
    fail("'" + type_name(obj) + "' object is not subscriptable");
  }
  const int64_t n = items ? static_cast<int64_t>(items->size()) : static_cast<int64_t>(cps.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (k > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(idx(start, "start"), k > 0 ? 0 : n - 1);
  const int64_t e = clamp(idx(stop, "stop"), k > 0 ? n : -1);
  std::vector<size_t> picked;
  for (int64_t i = b; k > 0 ? i < e : i > e; i += k) picked.push_back(static_cast<size_t>(i));
  if (items) {
    ValueList out;
    for (size_t i : picked) out.push_back((*items)[i]);
    return Value::list(std::move(out));
  }
  std::string out;
  for (size_t i : picked) append_utf8(out, cps[i]);
  return Value::string(std::move(out));
}

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const Args& args) {
  auto arg = [&](size_t i) -> const Value& {
    const Value* a = args.get(i, nullptr);
    if (!a) fail("test '" + name + "' needs an argument");
    return *a;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!is_integral(v)) fail("test '" + name + "' needs an integer");
    return (as_i64(v) % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = arg(0);
    if (!is_integral(v) || !is_integral(d) || as_i64(d) == 0) fail("divisibleby needs a nonzero integer");
    return as_i64(v) % as_i64(d) == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string& s = v.as_string();
    bool cased = false;
    for (unsigned char c : s) {
      if (std::isalpha(c)) cased = true;
      if (name == "lower" ? std::isupper(c) : std::islower(c)) return false;
    }
    return cased;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg(0));
  if (name == "ne" || name == "!=") return !equals(v, arg(0));
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg(0), "<") < 0;
  if (name == "le" || name == "<=") return compare(v, arg(0), "<=") <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg(0), ">") > 0;
  if (name == "ge" || name == ">=") return compare(v, arg(0), ">=") >= 0;
  if (name == "in") return binary_op(in, "in", v, arg(0)).as_bool();
  if (name == "sameas") {
    const Value& o = arg(0);
    if (v.v.index() != o.v.index()) return false;
    return v.is_none() || v.is_undefined() || (v.is_bool() && v.as_bool() == o.as_bool()) || equals(v, o);
  }
  fail("no test named '" + name + "'");
}

namespace {

Value global_range(Interpreter& in, const Args& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  std::vector<int64_t> a;
  for (const auto& v : args.positional) {
    if (!is_integral(v)) fail("range() arguments must be integers, not " + type_name(v));
    a.push_back(as_i64(v));
  }
  if (a.empty() || a.size() > 3) fail("range() takes 1 to 3 arguments");
  const int64_t start = a.size() == 1 ? 0 : a[0];
  const int64_t stop = a.size() == 1 ? a[0] : a[1];
  const int64_t step = a.size() == 3 ? a[2] : 1;
  if (step == 0) fail("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    in.count_iterations(1);
    out.push_back(Value::integer(i));
  }
  return Value::list(std::move(out));
}

Value kwargs_dict(const Args& args, const char* fn) {
  ValueDict d;
  for (const auto& v : args.positional) {
    if (!v.is_dict()) fail(std::string(fn) + "() takes a mapping or keyword arguments");
    for (const auto& [k, x] : v.as_dict().items) d.set(k, x);
  }
  for (const auto& [k, x] : args.keyword) d.set(k, x);
  return Value::dict(std::move(d));
}

Value make_callable(const char* name, std::function<Value(Interpreter&, const Args&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = std::move(fn);
  return Value{c};
}

}  // namespace

ValueDict builtin_globals() {
  ValueDict g;
  g.set("range", make_callable("range", global_range));
  g.set("dict", make_callable("dict", [](Interpreter&, const Args& a) { return kwargs_dict(a, "dict"); }));
  g.set("namespace", make_callable("namespace", [](Interpreter&, const Args& a) {
          auto ns = std::make_shared<Namespace>();
          ns->attrs = kwargs_dict(a, "namespace").as_dict();
          return Value{ns};
        }));
  return g;
}

}  // namespace pllm::jinja
