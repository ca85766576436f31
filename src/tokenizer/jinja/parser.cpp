#include "tokenizer/jinja/parser.h"

#include <initializer_list>

#include "tokenizer/jinja/lexer.h"

namespace pllm::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, &end);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const char* op) const { return cur().kind == Tok::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::text: return "template text";
      case Tok::var_begin: return "'{{'";
      case Tok::var_end: return "'}}'";
      case Tok::block_begin: return "'{%'";
      case Tok::block_end: return "end of statement block";
      case Tok::eof: return "end of template";
      case Tok::string: return "string";
      case Tok::integer: case Tok::floating: return "number";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void error(const std::string& what) const {
    fail("line " + std::to_string(cur().line) + ": " + what);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != Tok::name) error("expected a name, got " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != Tok::block_end) error("expected end of statement block, got " + describe(cur()));
    next();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxParseDepth) p_->error("template nested too deeply");
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  ExprPtr make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = cur().line;
    return e;
  }

  // ---- statements ----
  // Nodes until a block tag named in `ends` (its name is consumed, stored in *end) or the end.
  Body parse_body(std::initializer_list<const char*> ends, std::string* end) {
    DepthGuard guard(this);
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.kind == Tok::eof) {
        if (ends.size() == 0) return body;
        std::string list;
        for (const char* e : ends) list += std::string(list.empty() ? "" : " or ") + "'" + e + "'";
        error("unexpected end of template: unclosed block, expected " + list);
      }
      if (t.kind == Tok::text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::data;
        n->text = t.text;
        body.push_back(std::move(n));
        next();
      } else if (t.kind == Tok::var_begin) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = Node::output;
        n->line = cur().line;
        n->expr = parse_tuple();
        if (cur().kind != Tok::var_end) error("expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(n));
      } else if (t.kind == Tok::block_begin) {
        next();
        if (cur().kind == Tok::name) {
          for (const char* e : ends)
            if (cur().text == e) {
              *end = e;
              next();
              return body;
            }
        }
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
  }

  NodePtr parse_statement() {
    if (cur().kind != Tok::name) error("expected a statement name, got " + describe(cur()));
    const std::string tag = cur().text;
    auto n = std::make_unique<Node>();
    n->line = cur().line;
    next();
    std::string end;
    if (tag == "if") {
      n->kind = Node::if_;
      n->expr = parse_expression(false);
      expect_block_end();
      n->body = parse_body({"elif", "else", "endif"}, &end);
      Node* tail = n.get();
      while (end == "elif") {
        auto e = std::make_unique<Node>();
        e->kind = Node::if_;
        e->line = cur().line;
        e->expr = parse_expression(false);
        expect_block_end();
        e->body = parse_body({"elif", "else", "endif"}, &end);
        Node* next_tail = e.get();
        tail->else_body.push_back(std::move(e));
        tail = next_tail;
      }
      if (end == "else") {
        expect_block_end();
        tail->else_body = parse_body({"endif"}, &end);
      }
    } else if (tag == "for") {
      n->kind = Node::for_;
      n->targets = parse_targets();
      if (!skip_name("in")) error("expected 'in' in for loop, got " + describe(cur()));
      n->expr = parse_tuple(false);
      if (skip_name("if")) n->cond = parse_expression(true);
      if (is_name("recursive")) error("recursive for loops are not supported");
      expect_block_end();
      n->body = parse_body({"endfor", "else"}, &end);
      if (end == "else") {
        expect_block_end();
        n->else_body = parse_body({"endfor"}, &end);
      }
    } else if (tag == "set") {
      std::string first = expect_name();
      if (skip_op(".")) {
        n->targets = {first};
        n->attr = expect_name();
      } else {
        n->targets = {first};
        while (skip_op(",")) n->targets.push_back(expect_name());
      }
      if (skip_op("=")) {
        n->kind = Node::set;
        n->expr = parse_tuple();
      } else {
        if (!n->attr.empty() || n->targets.size() != 1) error("a block set assigns one plain name");
        n->kind = Node::set_block;
        if (is_op("|")) n->expr = parse_filters(make(Expr::literal));
        expect_block_end();
        n->body = parse_body({"endset"}, &end);
      }
    } else if (tag == "macro") {
      n->kind = Node::macro;
      n->text = expect_name();
      n->params = parse_params();
      expect_block_end();
      n->body = parse_body({"endmacro"}, &end);
    } else if (tag == "call") {
      n->kind = Node::call_block;
      if (is_op("(")) n->params = parse_params();
      n->expr = parse_expression(true);
      if (n->expr->kind != Expr::call) error("expected a call in the call block");
      expect_block_end();
      n->body = parse_body({"endcall"}, &end);
    } else if (tag == "filter") {
      n->kind = Node::filter_block;
      n->expr = parse_filters(make(Expr::literal), /*first_pipe=*/false);
      expect_block_end();
      n->body = parse_body({"endfilter"}, &end);
    } else if (tag == "generation") {
      n->kind = Node::scope;
      expect_block_end();
      n->body = parse_body({"endgeneration"}, &end);
    } else if (tag == "break" || tag == "continue") {
      n->kind = tag == "break" ? Node::break_ : Node::continue_;
    } else {
      --p_;  // point the message at the tag name
      error("encountered unknown tag '" + tag + "'");
    }
    expect_block_end();
    return n;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    names.push_back(expect_name());
    while (skip_op(",")) names.push_back(expect_name());
    if (paren) expect_op(")");
    return names;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    next();
    return params;
  }

  // ---- expressions ----
  // An expression or an implicit tuple `a, b` (a list value).
  ExprPtr parse_tuple(bool with_cond = true) {
    ExprPtr first = parse_expression(with_cond);
    if (!is_op(",")) return first;
    auto list = make(Expr::list);
    list->is_tuple = true;
    list->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind == Tok::var_end || cur().kind == Tok::block_end || is_op(")")) break;
      list->args.push_back(parse_expression(with_cond));
    }
    return list;
  }

  ExprPtr parse_expression(bool with_cond) {
    DepthGuard guard(this);
    ExprPtr e = parse_or();
    if (!with_cond) return e;
    while (is_name("if")) {
      next();
      auto c = make(Expr::cond);
      c->a = parse_or();
      c->b = std::move(e);
      if (skip_name("else")) c->c = parse_expression(true);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r) {
    auto e = make(Expr::binary);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (skip_name("or")) e = binary("or", std::move(e), parse_and());
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (skip_name("and")) e = binary("and", std::move(e), parse_not());
    return e;
  }
  ExprPtr parse_not() {
    if (skip_name("not")) {
      DepthGuard guard(this);
      auto e = make(Expr::unary);
      e->name = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    ExprPtr result;
    for (;;) {
      std::string op;
      if (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().kind == Tok::name && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      // a < b < c is (a < b) and (b < c); b is evaluated twice (it has no side effects)
      ExprPtr right = parse_math1();
      ExprPtr next_left = clone(*right);
      ExprPtr cmp = binary(op, std::move(left), std::move(right));
      result = result ? binary("and", std::move(result), std::move(cmp)) : std::move(cmp);
      left = std::move(next_left);
    }
    return result ? std::move(result) : std::move(left);
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      next();
      e = binary(op, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (skip_op("~")) e = binary("~", std::move(e), parse_math2());
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().text;
      next();
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (skip_op("**")) e = binary("**", std::move(e), parse_unary(true));
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(Expr::unary);
      e->name = cur().text;
      next();
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    if (t.kind == Tok::name) {
      auto e = make(Expr::literal);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = Expr::variable;
        e->name = t.text;
      }
      next();
      return e;
    }
    if (t.kind == Tok::string) {
      auto e = make(Expr::literal);
      std::string s;
      while (cur().kind == Tok::string) {
        s += cur().text;
        next();
      }
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.kind == Tok::integer || t.kind == Tok::floating) {
      auto e = make(Expr::literal);
      e->value = t.kind == Tok::integer ? Value::integer(t.int_value) : Value::floating(t.float_value);
      next();
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) {
        auto empty = make(Expr::list);
        empty->is_tuple = true;
        return empty;
      }
      ExprPtr first = parse_expression(true);
      if (skip_op(")")) return first;
      auto list = make(Expr::list);
      list->is_tuple = true;
      list->args.push_back(std::move(first));
      while (skip_op(",")) {
        if (is_op(")")) break;
        list->args.push_back(parse_expression(true));
      }
      expect_op(")");
      return list;
    }
    if (skip_op("[")) {
      auto list = make(Expr::list);
      while (!is_op("]")) {
        if (!list->args.empty()) expect_op(",");
        if (is_op("]")) break;
        list->args.push_back(parse_expression(true));
      }
      next();
      return list;
    }
    if (skip_op("{")) {
      auto dict = make(Expr::dict);
      while (!is_op("}")) {
        if (!dict->args.empty()) expect_op(",");
        if (is_op("}")) break;
        dict->keys.push_back(parse_expression(true));
        expect_op(":");
        dict->args.push_back(parse_expression(true));
      }
      next();
      return dict;
    }
    error("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        next();
        if (cur().kind == Tok::name) {
          auto a = make(Expr::attr);
          a->name = cur().text;
          a->a = std::move(e);
          next();
          e = std::move(a);
        } else if (cur().kind == Tok::integer) {
          auto a = make(Expr::item);
          a->b = make(Expr::literal);
          a->b->value = Value::integer(cur().int_value);
          a->a = std::move(e);
          next();
          e = std::move(a);
        } else {
          error("expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        next();
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    ExprPtr start, stop, step;
    if (!is_op(":")) start = parse_expression(true);
    if (skip_op("]")) {
      auto e = make(Expr::item);
      e->a = std::move(target);
      e->b = std::move(start);
      return e;
    }
    expect_op(":");
    if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
    if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    expect_op("]");
    auto e = make(Expr::slice);
    e->a = std::move(target);
    e->b = std::move(start);
    e->c = std::move(stop);
    e->args.push_back(std::move(step));
    return e;
  }

  void parse_args(Expr* e) {
    expect_op("(");
    while (!is_op(")")) {
      if (!e->args.empty() || !e->kwargs.empty()) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
      if (cur().kind == Tok::name && peek().kind == Tok::op && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e->kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!e->kwargs.empty()) error("positional argument follows keyword argument");
        e->args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::call);
    e->a = std::move(callee);
    parse_args(e.get());
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().kind == Tok::name) {
      next();
      n += '.';
      n += expect_name();
    }
    return n;
  }

  // `| f(args) | g ...` and `is [not] test args`, as jinja2's parse_filter_expr.
  ExprPtr parse_filters(ExprPtr e, bool first_pipe = true) {
    bool need_pipe = first_pipe;
    for (;;) {
      if (!need_pipe || is_op("|")) {
        if (need_pipe) next();
        need_pipe = true;
        auto f = make(Expr::filter);
        f->name = dotted_name();
        f->a = std::move(e);
        if (is_op("(")) parse_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        next();
        auto t = make(Expr::test);
        t->negated = skip_name("not");
        t->name = dotted_name();
        t->a = std::move(e);
        if (is_op("(")) {
          parse_args(t.get());
        } else if ((cur().kind == Tok::name || cur().kind == Tok::string || cur().kind == Tok::integer ||
                    cur().kind == Tok::floating || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error("cannot chain multiple tests with 'is'");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  static ExprPtr clone(const Expr& e) {
    auto c = std::make_unique<Expr>();
    c->kind = e.kind;
    c->line = e.line;
    c->value = e.value;
    c->name = e.name;
    c->negated = e.negated;
    if (e.a) c->a = clone(*e.a);
    if (e.b) c->b = clone(*e.b);
    if (e.c) c->c = clone(*e.c);
    for (const auto& x : e.args) c->args.push_back(x ? clone(*x) : nullptr);
    for (const auto& [k, x] : e.kwargs) c->kwargs.emplace_back(k, clone(*x));
    for (const auto& x : e.keys) c->keys.push_back(clone(*x));
    return c;
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::string& source) { return Parser(lex(source)).parse_template(); }

}  // namespace pllm::jinja
