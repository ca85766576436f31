// TokenVocab: every token's bytes, and the trie the matcher walks for a mask.
#include <algorithm>
#include <numeric>

#include "constrained/grammar_matcher.h"
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
