// The lazily determinised pushdown matcher of grammar_dfa.h.
#include "constrained/grammar_dfa.h"

#include <algorithm>

namespace pllm {
namespace {

// Memo budgets: past the soft ones the owner rebuilds between operations; the hard node cap
// stops one hostile operation from growing without end (its stacks are refused instead).
constexpr size_t kMaxRows = 16384;  // 16 MiB of transition rows
constexpr size_t kSoftNodes = size_t{1} << 20;
constexpr size_t kSoftStates = size_t{1} << 18;
constexpr size_t kHardNodes = size_t{1} << 23;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}

uint32_t min_code_point(uint8_t length) { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }

// An unfinished character, reduced to a representative of the bytes that behave alike when every
// code point from U+0080 up leads to the same place: then only the UTF-8 validity rules still
// tell prefixes apart (E0, ED, F0, F4 limit the next byte), so "\xE4\xB8" and "\xE5\x8F" are one
// state rather than thousands (CJK vocabularies).
Utf8Partial canonical(Utf8Partial p) {
  if (p.remaining + 1 == p.length) {  // only the lead byte read
    if (p.length == 2) p.value = 0x02;
    if (p.length == 3 && p.value != 0x0 && p.value != 0xD) p.value = 0x1;
    if (p.length == 4 && p.value != 0x0 && p.value != 0x4) p.value = 0x1;
  } else {  // the restricted byte is behind: any valid continuation completes a valid character
    p.value = p.remaining == 1 && p.length == 4 ? 0x1000 : 0x40;
  }
  return p;
}

bool uniform_above_ascii(const CharSet& cs) {
  const bool all = std::any_of(cs.ranges.begin(), cs.ranges.end(),
                               [](const CodeRange& r) { return r.lo <= 0x80 && r.hi >= kMaxCodePoint; });
  return all || !cs.intersects(0x80, kMaxCodePoint);
}

}  // namespace

LazyDfa::LazyDfa(std::shared_ptr<const Grammar> g) : g_(std::move(g)) { clear(); }

void LazyDfa::clear() {
  nodes_.assign(1, Node{kNoNode, kNoNode, 0});  // node 0: the empty stack
  node_ids_.clear();
  set_nodes_.clear();
  set_begin_.assign(1, 0);
  set_uniform_.clear();
  set_ids_.clear();
  states_.clear();
  state_ids_.clear();
  rows_.clear();
  seen_.clear();
  emitted_.clear();
  stamp_ = 0;
  start_ = kUnknown;
}

bool LazyDfa::over_budget() const {
  return nodes_.size() > kSoftNodes || states_.size() > kSoftStates || rows_.size() >= kMaxRows * 256;
}

void LazyDfa::begin_step() {
  if (++stamp_ == 0) {  // wrapped: old marks could collide
    std::fill(seen_.begin(), seen_.end(), 0);
    std::fill(emitted_.begin(), emitted_.end(), 0);
    stamp_ = 1;
  }
  out_.clear();
  work_left_ = kMaxClosureWork;
}

bool LazyDfa::refuse_for_bound() {
  hit_bound_ = true;
  return false;
}

bool LazyDfa::refuse_as_ambiguous() {
  too_ambiguous_ = true;
  return refuse_for_bound();
}

uint32_t LazyDfa::node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  const auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  const uint32_t depth = nodes_[parent].depth + 1;
  if (depth > kMaxStackDepth || nodes_.size() >= kHardNodes) {
    refuse_for_bound();
    return kNoNode;
  }
  const auto id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({pos, parent, depth});
  node_ids_.emplace(key, id);
  return id;
}

// Expands the stacks on work_ until each top is a terminal, appending them (once) to out_.
// A rule reference in tail position replaces its frame instead of pushing a return frame, so
// repetition does not deepen the stack and a cycle of tail references (allowed by
// analyse_grammar) comes back to a node already seen and stops.
bool LazyDfa::close(uint32_t stack) {
  const auto& E = g_->elements;
  work_.clear();
  work_.push_back(stack);
  while (!work_.empty()) {
    const uint32_t n = work_.back();
    work_.pop_back();
    if (seen_.size() < nodes_.size()) {
      seen_.resize(nodes_.size() + 1024, 0);
      emitted_.resize(nodes_.size() + 1024, 0);
    }
    const Node nd = nodes_[n];
    if (n == 0 || E[nd.pos].kind == ElementKind::chars) {
      if (emitted_[n] != stamp_) {
        emitted_[n] = stamp_;
        out_.push_back(n);
        if (out_.size() > kMaxStacks) return refuse_as_ambiguous();
      }
      continue;
    }
    if (seen_[n] == stamp_) continue;
    seen_[n] = stamp_;
    if (work_left_ == 0) return refuse_as_ambiguous();
    --work_left_;
    const uint32_t base = E[nd.pos + 1].kind == ElementKind::end ? nd.parent : node(nd.pos + 1, nd.parent);
    if (base == kNoNode) continue;
    for (uint32_t alt : g_->rules[E[nd.pos].value].alternatives) {
      const uint32_t child = E[alt].kind == ElementKind::end ? base : node(alt, base);
      if (child != kNoNode) work_.push_back(child);
    }
  }
  return true;
}

bool LazyDfa::close_alternatives(uint32_t rule, uint32_t base) {
  for (uint32_t alt : g_->rules[rule].alternatives) {
    const uint32_t child = g_->elements[alt].kind == ElementKind::end ? base : node(alt, base);
    if (child != kNoNode && !close(child)) return false;
  }
  return true;
}

int32_t LazyDfa::start() {
  if (start_ != kUnknown) return start_;
  begin_step();
  start_ = close_alternatives(g_->root, 0) && !out_.empty() ? intern_state(out_, {}) : kDead;
  return start_;
}

int32_t LazyDfa::advance(uint32_t set, uint32_t cp) {
  if (too_ambiguous_) return kDead;
  const auto& E = g_->elements;
  begin_step();
  const auto [begin, end] = set_range(set);
  for (const uint32_t* it = begin; it != end; ++it) {
    if (*it == 0) continue;
    // Copied: close() may grow nodes_ and set_nodes_ does not change here.
    const Node nd = nodes_[*it];
    if (!g_->charsets[E[nd.pos].value].contains(cp)) continue;
    const uint32_t next = E[nd.pos + 1].kind == ElementKind::end ? nd.parent : node(nd.pos + 1, nd.parent);
    if (next != kNoNode && !close(next)) return kDead;
  }
  if (out_.empty()) return kDead;
  return intern_state(out_, {});
}

bool LazyDfa::any_top_intersects(uint32_t set, uint32_t lo, uint32_t hi) const {
  const auto [begin, end] = set_range(set);
  for (const uint32_t* it = begin; it != end; ++it)
    if (*it != 0 && g_->charsets[g_->elements[nodes_[*it].pos].value].intersects(lo, hi)) return true;
  return false;
}

int32_t LazyDfa::compute(int32_t state, uint8_t byte) {
  const State s = states_[static_cast<size_t>(state)];
  Utf8Partial p = s.partial;
  if (p.remaining == 0) {
    if (byte < 0x80) return advance(s.set, byte);
    if (byte >= 0xC2 && byte <= 0xDF) {
      p = {static_cast<uint32_t>(byte & 0x1F), 1, 2};
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      p = {static_cast<uint32_t>(byte & 0x0F), 2, 3};
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      p = {static_cast<uint32_t>(byte & 0x07), 3, 4};
    } else {
      return kDead;  // a continuation byte with no lead, or a byte UTF-8 never uses
    }
  } else {
    if ((byte & 0xC0) != 0x80) return kDead;
    p.value = (p.value << 6) | (byte & 0x3F);
    --p.remaining;
    if (p.remaining == 0) {
      const uint32_t cp = p.value;
      if (cp < min_code_point(p.length) || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return kDead;
      return advance(s.set, cp);
    }
  }
  // An unfinished character lives on only if some stack can take a code point it may become.
  const uint32_t shift = 6u * p.remaining;
  const uint32_t lo = std::max(p.value << shift, min_code_point(p.length));
  const uint32_t hi = std::min((p.value << shift) | ((1u << shift) - 1), kMaxCodePoint);
  if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return kDead;
  if (!any_top_intersects(s.set, lo, hi)) return kDead;
  return intern_partial(s.set, set_uniform_[s.set] ? canonical(p) : p);
}

int32_t LazyDfa::step_slow(int32_t state, uint8_t byte) {
  if (rows_.size() >= kMaxRows * 256) return compute(state, byte);  // over budget: no memo
  const auto row = static_cast<int32_t>(rows_.size() / 256);
  rows_.resize(rows_.size() + 256, kUnknown);
  states_[static_cast<size_t>(state)].row = row;
  const int32_t next = compute(state, byte);
  rows_[static_cast<size_t>(row) * 256 + byte] = next;
  return next;
}

int32_t LazyDfa::intern_state(std::vector<uint32_t>& stacks, Utf8Partial partial) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  uint64_t h = stacks.size();
  for (uint32_t n : stacks) h = mix(h, n);
  uint32_t set = UINT32_MAX;
  for (auto [it, last] = set_ids_.equal_range(h); it != last; ++it) {
    const auto [b, e] = set_range(it->second);
    if (static_cast<size_t>(e - b) == stacks.size() && std::equal(b, e, stacks.begin())) {
      set = it->second;
      break;
    }
  }
  if (set == UINT32_MAX) {
    set = static_cast<uint32_t>(set_begin_.size() - 1);
    set_nodes_.insert(set_nodes_.end(), stacks.begin(), stacks.end());
    set_begin_.push_back(static_cast<uint32_t>(set_nodes_.size()));
    bool uniform = true;
    for (uint32_t n : stacks)
      if (n != 0) uniform = uniform && uniform_above_ascii(g_->charsets[g_->elements[nodes_[n].pos].value]);
    set_uniform_.push_back(uniform);
    set_ids_.emplace(h, set);
  }
  return intern_partial(set, partial);
}

int32_t LazyDfa::intern_partial(uint32_t set, Utf8Partial p) {
  const uint64_t key = (uint64_t{set} << 32) | (uint64_t{p.length} << 28) | (uint64_t{p.remaining} << 24) | p.value;
  const auto [it, inserted] = state_ids_.try_emplace(key, static_cast<int32_t>(states_.size()));
  if (inserted) states_.push_back({set, p, -1, false, false, {0, 0}});
  return it->second;
}

void LazyDfa::compute_loops(int32_t state) {
  uint64_t ascii[2] = {0, 0};
  bool non_ascii = false;
  const State s = states_[static_cast<size_t>(state)];
  if (s.partial.remaining == 0) {
    for (uint32_t b = 0; b < 128; ++b)
      if (step(state, static_cast<uint8_t>(b)) == state) ascii[b >> 6] |= uint64_t{1} << (b & 63);
    // All of U+0080..U+10FFFF behave alike when each top set holds all of them or none of them;
    // then one of them tells where they all go.
    non_ascii = set_uniform_[s.set] && advance(s.set, 0x80) == state;
  }
  State& out = states_[static_cast<size_t>(state)];
  out.loop_known = true;
  out.loop_non_ascii = non_ascii;
  out.loop_ascii[0] = ascii[0];
  out.loop_ascii[1] = ascii[1];
}

bool LazyDfa::loops_on(int32_t state, const uint64_t ascii[2], bool non_ascii) {
  if (!states_[static_cast<size_t>(state)].loop_known) compute_loops(state);
  const State& s = states_[static_cast<size_t>(state)];
  return (ascii[0] & ~s.loop_ascii[0]) == 0 && (ascii[1] & ~s.loop_ascii[1]) == 0 && (!non_ascii || s.loop_non_ascii);
}

bool LazyDfa::is_complete(int32_t state) const {
  const State& s = states_[static_cast<size_t>(state)];
  return s.partial.remaining == 0 && set_begin_[s.set] != set_begin_[s.set + 1] && set_nodes_[set_begin_[s.set]] == 0;
}

bool LazyDfa::is_finished(int32_t state) const {
  const State& s = states_[static_cast<size_t>(state)];
  return is_complete(state) && set_begin_[s.set + 1] - set_begin_[s.set] == 1;
}

DfaSnapshot LazyDfa::save(int32_t state) const {
  DfaSnapshot snap;
  const State& s = states_[static_cast<size_t>(state)];
  snap.partial = s.partial;
  const auto [begin, end] = set_range(s.set);
  for (const uint32_t* it = begin; it != end; ++it) {
    std::vector<uint32_t> stack;
    for (uint32_t n = *it; n != 0; n = nodes_[n].parent) stack.push_back(nodes_[n].pos);
    std::reverse(stack.begin(), stack.end());
    snap.stacks.push_back(std::move(stack));
  }
  return snap;
}

int32_t LazyDfa::restore(const DfaSnapshot& snap) {
  std::vector<uint32_t> stacks;
  for (const auto& frames : snap.stacks) {
    uint32_t n = 0;
    for (uint32_t pos : frames) n = node(pos, n);  // was within the bounds when saved
    stacks.push_back(n);
  }
  return intern_state(stacks, snap.partial);
}

}  // namespace pllm
