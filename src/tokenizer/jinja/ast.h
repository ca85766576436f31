// The syntax tree of a Jinja template: expressions and statements.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace pllm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    literal,    // value
    variable,   // name
    list,       // args (a tuple is a list)
    dict,       // kwargs as key expressions in args, values in kwargs' second (keys in `keys`)
    attr,       // a.name
    item,       // a[b]
    slice,      // a[b:c:d] (any of b, c, d may be null)
    call,       // a(args, kwargs)
    filter,     // a | name(args, kwargs)
    test,       // a is [not] name(args)
    unary,      // name in {"-", "+", "not"} applied to a
    binary,     // a name b, name an arithmetic operator, "and", "or", "in", "not in" or a comparison
    cond,       // b if a else c (c may be null)
  };
  Kind kind = literal;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;  // `is not`
  bool is_tuple = false;  // a list written as a tuple: (a, b) or a, b
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<ExprPtr> keys;  // dict literal keys, parallel to args (values)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Node {
  enum Kind {
    data,        // text (template data)
    output,      // {{ expr }}
    if_,         // expr, body, else_body (elif is a nested if_ in else_body)
    for_,        // targets in expr [if cond], body, else_body
    set,         // targets (or ns.attr: targets = {ns}, attr) = expr
    set_block,   // {% set targets[0] %}body{% endset %}
    macro,       // {% macro name(params) %}body{% endmacro %}
    call_block,  // {% call(params) expr %}body{% endcall %}: body is `caller`
    filter_block,  // {% filter f %}body{% endfilter %}: expr is the filter applied to Undefined
    break_,
    continue_,
    scope,       // a body rendered in place ({% generation %})
  };
  Kind kind = data;
  int line = 0;
  std::string text;  // text, macro name
  std::vector<std::string> targets;
  std::string attr;  // set ns.attr
  ExprPtr expr, cond;
  Body body, else_body;
  std::vector<MacroParam> params;
};

}  // namespace pllm::jinja
