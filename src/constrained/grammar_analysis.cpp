// Code point sets, and the checks a compiled grammar must pass before a matcher may run it:
// which rules derive the empty string, and that no rule reaches itself through leftmost
// positions (left recursion), which would make a stack machine loop without consuming input.
#include <algorithm>
#include <string>

#include "constrained/grammar_internal.h"

namespace pllm {

CharSet CharSet::from_ranges(std::vector<CodeRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  CharSet set;
  for (const CodeRange& r : ranges) {
    if (!set.ranges.empty() && r.lo <= set.ranges.back().hi + 1) {
      set.ranges.back().hi = std::max(set.ranges.back().hi, r.hi);
    } else {
      set.ranges.push_back(r);
    }
  }
  for (const CodeRange& r : set.ranges)
    for (uint32_t c = r.lo; c <= r.hi && c < 128; ++c) set.ascii[c >> 6] |= uint64_t{1} << (c & 63);
  return set;
}

CharSet CharSet::complement() const {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const CodeRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return from_ranges(std::move(out));
}

bool CharSet::operator==(const CharSet& o) const {
  if (ranges.size() != o.ranges.size()) return false;
  for (size_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].lo != o.ranges[i].lo || ranges[i].hi != o.ranges[i].hi) return false;
  return true;
}

std::string rule_display_name(const Grammar& g, uint32_t rule) {
  const GrammarRule& r = g.rules[rule];
  if (!r.name.empty()) return r.name;
  return g.rules[r.owner].name + "-" + std::to_string(rule);
}

namespace {

// Worklist fixpoint, linear in the grammar: an alternative is nullable once every element in it
// is a reference to a nullable rule.
void compute_nullable(Grammar& g) {
  const uint32_t n_rules = static_cast<uint32_t>(g.rules.size());
  std::vector<uint32_t> pending;                     // per alternative: references not yet nullable
  std::vector<uint32_t> alt_rule;                    // per alternative: its rule
  std::vector<std::vector<uint32_t>> uses(n_rules);  // per rule: alternatives referring to it
  std::vector<uint32_t> queue;
  for (uint32_t r = 0; r < n_rules; ++r) {
    for (uint32_t start : g.rules[r].alternatives) {
      const auto alt = static_cast<uint32_t>(pending.size());
      uint32_t refs = 0;
      bool has_chars = false;
      for (uint32_t e = start; g.elements[e].kind != ElementKind::end; ++e) {
        if (g.elements[e].kind == ElementKind::chars) {
          has_chars = true;
        } else {
          ++refs;
          uses[g.elements[e].value].push_back(alt);
        }
      }
      pending.push_back(has_chars ? UINT32_MAX : refs);
      alt_rule.push_back(r);
      if (refs == 0 && !has_chars && !g.rules[r].nullable) {
        g.rules[r].nullable = true;
        queue.push_back(r);
      }
    }
  }
  while (!queue.empty()) {
    const uint32_t s = queue.back();
    queue.pop_back();
    for (uint32_t alt : uses[s]) {
      if (pending[alt] == UINT32_MAX || --pending[alt] != 0) continue;
      GrammarRule& owner = g.rules[alt_rule[alt]];
      if (!owner.nullable) {
        owner.nullable = true;
        queue.push_back(alt_rule[alt]);
      }
    }
  }
}

struct LeftEdge {
  uint32_t to = 0;
  bool tail = false;  // nothing follows the reference in its alternative
};

// Tarjan's strongly connected components, iteratively (a grammar may have 100k rules).
std::vector<uint32_t> components(const std::vector<std::vector<LeftEdge>>& edges) {
  const auto n = static_cast<uint32_t>(edges.size());
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> index(n, kNone), low(n, 0), comp(n, kNone), stack;
  std::vector<bool> on_stack(n, false);
  std::vector<std::pair<uint32_t, size_t>> calls;  // (node, next edge)
  uint32_t next_index = 0, next_comp = 0;
  for (uint32_t root = 0; root < n; ++root) {
    if (index[root] != kNone) continue;
    calls.push_back({root, 0});
    index[root] = low[root] = next_index++;
    stack.push_back(root);
    on_stack[root] = true;
    while (!calls.empty()) {
      auto& [v, i] = calls.back();
      if (i < edges[v].size()) {
        const uint32_t w = edges[v][i++].to;
        if (index[w] == kNone) {
          index[w] = low[w] = next_index++;
          stack.push_back(w);
          on_stack[w] = true;
          calls.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const uint32_t done = v;
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[done]);
      if (low[done] == index[done]) {
        uint32_t w = kNone;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          comp[w] = next_comp;
        } while (w != done);
        ++next_comp;
      }
    }
  }
  return comp;
}

}  // namespace

Result<void> analyse_grammar(Grammar& g) {
  compute_nullable(g);
  std::vector<std::vector<LeftEdge>> edges(g.rules.size());
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    for (uint32_t start : g.rules[r].alternatives) {
      for (uint32_t e = start; g.elements[e].kind == ElementKind::rule; ++e) {
        const uint32_t to = g.elements[e].value;
        edges[r].push_back({to, g.elements[e + 1].kind == ElementKind::end});
        if (!g.rules[to].nullable) break;
      }
    }
  }
  const std::vector<uint32_t> comp = components(edges);
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    for (const LeftEdge& e : edges[r]) {
      if (e.tail || comp[e.to] != comp[r]) continue;
      const GrammarRule& named = g.rules[g.rules[r].owner];
      return make_error(Status::invalid_argument,
                        std::to_string(named.line) + ":" + std::to_string(named.column) + ": rule '" +
                            rule_display_name(g, r) +
                            "' is left-recursive: it can reach itself again without consuming input "
                            "(rewrite it with repetition, e.g. list ::= item (\",\" item)*)");
    }
  }
  return {};
}

}  // namespace pllm
