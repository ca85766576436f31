#include "tokenizer/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pllm::jinja {

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto hex4 = [&](uint32_t u) {
    char b[16];
    std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(u & 0xffff));
    out += b;
  };
  for (uint32_t cp : to_code_points(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20) {
          hex4(cp);
        } else if (ensure_ascii && cp > 0x7e) {
          if (cp >= 0x10000) {
            const uint32_t v = cp - 0x10000;
            hex4(0xd800 + (v >> 10));
            hex4(0xdc00 + (v & 0x3ff));
          } else {
            hex4(cp);
          }
        } else {
          append_utf8(out, cp);
        }
    }
  }
  out += '"';
}

struct Dumper {
  const JsonDumpOptions& o;
  std::string item_sep, key_sep;
  std::string out;
  int depth = 0;

  void newline(int level) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o.indent;
  }

  void dump(const Value& v) {
    if (++depth > 512) fail("tojson: value nested too deeply");
    switch (v.v.index()) {
      case 1: out += "null"; break;
      case 2: out += v.as_bool() ? "true" : "false"; break;
      case 3: out += std::to_string(v.as_int()); break;
      case 4: {
        const double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += float_repr(d);
        break;
      }
      case 5: dump_string(out, v.as_string(), o.ensure_ascii); break;
      case 6: {
        const auto& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          break;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          newline(depth);
          dump(items[i]);
        }
        newline(depth - 1);
        out += ']';
        break;
      }
      case 7: {
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.as_dict().items) items.push_back(&kv);
        if (items.empty()) {
          out += "{}";
          break;
        }
        if (o.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          newline(depth);
          dump_string(out, items[i]->first, o.ensure_ascii);
          out += key_sep;
          dump(items[i]->second);
        }
        newline(depth - 1);
        out += '}';
        break;
      }
      default:
        fail("Object of type " + type_name(v) + " is not JSON serializable");
    }
    --depth;
  }
};

}  // namespace

std::string to_json(const Value& v, const JsonDumpOptions& opts) {
  Dumper d{opts, opts.item_separator, opts.key_separator, {}, 0};
  if (d.item_sep.empty()) d.item_sep = opts.indent ? "," : ", ";
  if (d.key_sep.empty()) d.key_sep = ": ";
  d.dump(v);
  return std::move(d.out);
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace pllm::jinja
