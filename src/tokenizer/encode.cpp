// Merge algorithms: byte-level BPE (ranked merges) and SentencePiece BPE (score-driven),
// both O(n log n) per pre-token with a lazily-invalidated priority queue.
#include <queue>

#include "tokenizer/vocab.h"

namespace pllm {

namespace {

struct Symbol {
  uint32_t off;  // byte offset in the word
  uint32_t n;    // byte length; 0 once merged into its left neighbour
  int prev, next;
};

std::vector<Symbol> split_chars(std::string_view w) {
  std::vector<Symbol> syms;
  syms.reserve(w.size());
  size_t off = 0;
  int index = 0;
  while (off < w.size()) {
    const size_t n = std::min(w.size() - off, utf8_len_from_lead(static_cast<uint8_t>(w[off])));
    syms.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(n), index - 1,
                    off + n == w.size() ? -1 : index + 1});
    off += n;
    ++index;
  }
  return syms;
}

void merge_into_left(std::vector<Symbol>& syms, int left, int right) {
  Symbol& l = syms[left];
  Symbol& r = syms[right];
  l.n += r.n;
  r.n = 0;
  l.next = r.next;
  if (r.next >= 0) syms[r.next].prev = left;
}

}  // namespace

// ---- byte-level BPE ----------------------------------------------------------------

std::string bpe_rank_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(2 + left.size() + right.size());
  key += static_cast<char>(left.size() & 0xFF);
  key += static_cast<char>((left.size() >> 8) & 0xFF);
  key.append(left);
  key.append(right);
  return key;
}


int VocabTokenizer::bpe_rank(std::string_view left, std::string_view right) const {
  const auto it = ranks_.find(bpe_rank_key(left, right));
  return it == ranks_.end() ? -1 : it->second;
}

void VocabTokenizer::bpe_word(const std::string& word, std::vector<TokenId>& out) const {
  if (pre_.ignore_merges) {
    const auto it = to_id_.find(std::string_view(word));
    if (it != to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> syms = split_chars(word);
  const std::string_view w(word);
  auto text_of = [&](int i) { return w.substr(syms[i].off, syms[i].n); };

  struct Bigram {
    int rank;
    int left, right;
    uint32_t size;
  };
  // Lowest rank first; ties go to the leftmost pair.
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = bpe_rank(text_of(left), text_of(right));
    if (rank < 0) return;
    queue.push({rank, left, right, syms[left].n + syms[right].n});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    // Stale entries: one side already merged away, or the right side grew.
    if (syms[b.left].n == 0 || syms[b.right].n == 0 || syms[b.left].n + syms[b.right].n != b.size)
      continue;
    merge_into_left(syms, b.left, b.right);
    add_bigram(syms[b.left].prev, b.left);
    add_bigram(b.left, syms[b.left].next);
  }

  for (int i = 0; i != -1 && !syms.empty(); i = syms[i].next) {
    const std::string_view t = text_of(i);
    const auto it = to_id_.find(t);
    if (it != to_id_.end()) {
      out.push_back(it->second);
      continue;
    }
    // Not in the vocabulary: fall back to single-byte tokens where they exist (gemma4: <0xXX>).
    for (const char c : t) {
      if (sp_bpe_) {
        static const char* hex = "0123456789ABCDEF";
        const auto b = static_cast<uint8_t>(c);
        const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        const auto bt = to_id_.find(std::string_view(buf, 6));
        if (bt != to_id_.end()) out.push_back(bt->second);
        continue;
      }
      const auto bt = to_id_.find(std::string_view(&c, 1));
      if (bt != to_id_.end()) out.push_back(bt->second);
    }
  }
}

void VocabTokenizer::bpe_tokenize(std::string_view text, std::vector<TokenId>& out) const {
  if (sp_bpe_) {  // gemma4: spaces as U+2581, words of raw UTF-8
    std::string s;
    s.reserve(text.size() * 3 / 2);
    for (const char c : sanitize_utf8(text)) {
      if (c == ' ')
        s += "\xE2\x96\x81";
      else
        s += c;
    }
    size_t start = 0;
    std::string word;
    for (const size_t len : splitter_->split(s)) {
      word.assign(s, start, len);
      start += len;
      // A run of newlines that is a token stays whole (llama.cpp's fix for Gemma 4, its PR 21343).
      if (word.find_first_not_of('\n') == std::string::npos)
        if (const auto it = to_id_.find(std::string_view(word)); it != to_id_.end()) {
          out.push_back(it->second);
          continue;
        }
      if (!word.empty()) bpe_word(word, out);
    }
    return;
  }
  const std::string clean = sanitize_utf8(text);
  const std::vector<size_t> lens = splitter_->split(clean);
  size_t start = 0;
  std::string mapped;
  for (const size_t len : lens) {
    mapped.clear();
    for (size_t i = start; i < start + len; ++i) mapped += byte_to_unicode(static_cast<uint8_t>(clean[i]));
    start += len;
    if (!mapped.empty()) bpe_word(mapped, out);
  }
}

// ---- SentencePiece BPE ------------------------------------------------------------------

TokenId VocabTokenizer::byte_token(uint8_t b) const {
  static const char* hex = "0123456789ABCDEF";
  const char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
  auto it = to_id_.find(std::string_view(buf, 6));
  if (it != to_id_.end()) return it->second;
  const char c = static_cast<char>(b);
  it = to_id_.find(std::string_view(&c, 1));
  if (it != to_id_.end()) return it->second;
  return unk_;
}

void VocabTokenizer::spm_tokenize(const std::string& text, std::vector<TokenId>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> syms = split_chars(text);
  const std::string_view w(text);

  struct Bigram {
    float score;
    int left, right;
    uint32_t size;
  };
  // Highest score first; ties go to the leftmost pair.
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto add_bigram = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = syms[left].n + syms[right].n;
    const auto it = to_id_.find(w.substr(syms[left].off, size));
    if (it == to_id_.end()) return;
    queue.push({score_[it->second], left, right, size});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    if (syms[b.left].n == 0 || syms[b.right].n == 0 || syms[b.left].n + syms[b.right].n != b.size)
      continue;
    merge_into_left(syms, b.left, b.right);
    add_bigram(syms[b.left].prev, b.left);
    add_bigram(b.left, syms[b.left].next);
  }

  for (int i = 0; i != -1; i = syms[i].next) {
    const std::string_view t = w.substr(syms[i].off, syms[i].n);
    const auto it = to_id_.find(t);
    if (it != to_id_.end()) {
      out.push_back(it->second);
      continue;
    }
    // Byte fallback: <0xXX> tokens (or the unknown token).
    for (const char c : t) {
      const TokenId id = byte_token(static_cast<uint8_t>(c));
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace pllm
