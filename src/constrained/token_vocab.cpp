// TokenVocab: every token's bytes, and the trie the matcher walks for a mask.
#include <algorithm>
#include <numeric>

#include "constrained/grammar_matcher.h"
#include "constrained/tool_calls.h"
#include "constrained/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace pllm {

void TokenVocab::Impl::build_trie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id)
    if (!pieces[static_cast<size_t>(id)].empty() && !end_of_generation[static_cast<size_t>(id)]) order.push_back(id);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
  });
  // Sorted pieces: each shares a prefix with the previous one; the path holds the nodes of the
  // previous piece, nodes past the shared prefix are closed, the new suffix is appended.
  byte.assign(1, 0);
  depth.assign(1, 0);
  subtree_end.assign(1, 0);
  token_begin.assign(1, 0);
  tokens.clear();
  std::vector<uint32_t> path{0};
  std::vector<uint32_t> parent{0};
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view p = pieces[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < p.size() && common < prev.size() && p[common] == prev[common]) ++common;
    while (path.size() - 1 > common) {
      subtree_end[path.back()] = static_cast<uint32_t>(byte.size());
      path.pop_back();
    }
    for (size_t i = common; i < p.size(); ++i) {
      parent.push_back(path.back());
      path.push_back(static_cast<uint32_t>(byte.size()));
      byte.push_back(static_cast<uint8_t>(p[i]));
      depth.push_back(static_cast<uint32_t>(i + 1));
      subtree_end.push_back(0);
      token_begin.push_back(static_cast<uint32_t>(tokens.size()));
    }
    tokens.push_back(id);
    max_depth = std::max(max_depth, static_cast<uint32_t>(p.size()));
    prev = p;
  }
  for (uint32_t n : path) subtree_end[n] = static_cast<uint32_t>(byte.size());
  token_begin.push_back(static_cast<uint32_t>(tokens.size()));
  build_summaries(parent);
}

namespace {

// Strict UTF-8 validity of a byte path, one byte at a time: the same rules as the matcher's
// decoder (no overlong forms, no surrogates, nothing above U+10FFFF).
struct Utf8Check {
  bool valid = true;
  uint8_t remaining = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the next continuation byte

  Utf8Check next(uint8_t b) const {
    Utf8Check c = *this;
    if (!valid) return c;
    if (remaining > 0) {
      c.valid = b >= lo && b <= hi;
      c.remaining = static_cast<uint8_t>(remaining - 1);
      c.lo = 0x80;
      c.hi = 0xBF;
      return c;
    }
    if (b < 0x80) return c;
    c.remaining = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
    c.valid = c.remaining > 0;
    c.lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    c.hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    return c;
  }
};

}  // namespace

void TokenVocab::Impl::build_summaries(const std::vector<uint32_t>& parent) {
  const auto n = static_cast<uint32_t>(byte.size());
  std::vector<Utf8Check> check(n);
  std::vector<Below> all(n);
  for (uint32_t i = 1; i < n; ++i) check[i] = check[parent[i]].next(byte[i]);  // preorder: parent first
  for (uint32_t i = n; i-- > 1;) {  // children before parents
    Below& p = all[parent[i]];
    const Below& c = all[i];
    p.ascii[0] |= c.ascii[0];
    p.ascii[1] |= c.ascii[1];
    p.non_ascii |= c.non_ascii || byte[i] >= 0x80;
    p.valid_utf8 &= c.valid_utf8 && check[i].valid;
    if (byte[i] < 0x80) p.ascii[byte[i] >> 6] |= uint64_t{1} << (byte[i] & 63);
  }
  below_index.assign(n, kNoSummary);
  below.clear();
  for (uint32_t i = 1; i < n; ++i) {
    if (subtree_end[i] - i <= kSummaryMinNodes) continue;
    below_index[i] = static_cast<uint32_t>(below.size());
    below.push_back(all[i]);
  }
}

std::shared_ptr<const TokenVocab> TokenVocab::from_pieces(std::vector<std::string> pieces,
                                                         std::vector<int32_t> end_of_generation) {
  auto impl = std::make_shared<Impl>();
  impl->pieces = std::move(pieces);
  impl->end_of_generation.assign(impl->pieces.size(), 0);
  for (int32_t id : end_of_generation) {
    if (id < 0 || static_cast<size_t>(id) >= impl->pieces.size()) continue;  // not a token: ignored
    if (!impl->end_of_generation[static_cast<size_t>(id)]) impl->eog_ids.push_back(id);
    impl->end_of_generation[static_cast<size_t>(id)] = 1;
  }
  impl->build_trie();
  auto vocab = std::make_shared<TokenVocab>();
  vocab->impl_ = std::move(impl);
  return vocab;
}

std::shared_ptr<const TokenVocab> TokenVocab::build(const Tokenizer& tok) {
  std::vector<std::string> pieces(static_cast<size_t>(std::max(tok.n_vocab(), 0)));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
    pieces[static_cast<size_t>(id)] = tok.token_to_piece(id);
    if (tok.is_end_of_generation(id)) eog.push_back(id);
  }
  // Tool-call markers that are control tokens (no text of their own) are spelled out, so a
  // grammar can ask for them and the call parser can see them.
  for (const std::string& marker : tool_call_markers()) {
    const int32_t id = tok.find_token(marker);
    if (id >= 0 && static_cast<size_t>(id) < pieces.size() && pieces[static_cast<size_t>(id)].empty() &&
        !tok.is_end_of_generation(id))
      pieces[static_cast<size_t>(id)] = marker;
  }
  return from_pieces(std::move(pieces), std::move(eog));
}

int32_t TokenVocab::n_vocab() const { return static_cast<int32_t>(impl_->pieces.size()); }

std::string_view TokenVocab::piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return {};
  return impl_->pieces[static_cast<size_t>(id)];
}

bool TokenVocab::is_end_of_generation(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->end_of_generation[static_cast<size_t>(id)];
}

}  // namespace pllm
