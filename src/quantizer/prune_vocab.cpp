// Vocabulary pruning: the keep set, the rewritten tokenizer metadata and the kept rows
// (quantizer/prune_vocab.h).
#include "quantizer/prune_vocab.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/thread_pool.h"
#include "quantizer/quantize_model.h"

namespace pllm {
namespace {

// Why a token is kept (0: dropped). The first reason found is the one counted.
enum Why : uint8_t { kDropped = 0, kText = 1, kSpecial = 2, kClosure = 3 };

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// A merge "left right" split the way the tokenizer splits it (tokenizer.cpp: the first space
// after the first byte, so a left part may itself be " "); false when there is none.
bool split_merge(const std::string& m, std::string_view* left, std::string_view* right) {
  const size_t pos = m.find(' ', 1);
  if (pos == std::string::npos) return false;
  *left = std::string_view(m).substr(0, pos);
  *right = std::string_view(m).substr(pos + 1);
  return true;
}

// Byte tokens, so any text still tokenizes: gpt2's byte-level symbols, SentencePiece's <0xXX>
// byte-fallback tokens. All that exist are kept. A vocabulary may lack some (SmolLM2 has no
// symbol for 21 bytes it never saw, 0x04 or 0xFF among them): text with such a byte lost it
// before pruning too, unless a longer token held it. So every token with a character whose
// bytes have no byte token of their own stays (or that character's own token, when it has
// one), and text keeps every byte it kept before. Error: no byte tokens at all. Returns the
// number of bytes without a token.
Result<int> keep_byte_fallback(const VocabData& vocab, const VocabTokenizer& tok, std::vector<uint8_t>& why) {
  auto keep = [&](TokenId id) {
    if (why[size_t(id)] == kDropped) why[size_t(id)] = kSpecial;
  };
  bool has[256];
  std::unordered_map<std::string, uint8_t> symbol_byte;  // gpt2: byte-level character -> its byte
  int missing = 0;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    if (tok.is_spm()) {
      static const char* hex = "0123456789ABCDEF";
      s = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    } else {
      s = byte_to_unicode(uint8_t(b));
      symbol_byte.emplace(s, uint8_t(b));
    }
    const TokenId id = tok.find_token(s);
    has[b] = id >= 0;
    if (id >= 0) keep(id);
    else ++missing;
  }
  if (missing == 256)
    return make_error(Status::unsupported, std::string("cannot prune this vocabulary: it has no byte tokens (") +
                                               (tok.is_spm() ? "<0x00>..<0xFF>" : "byte-level symbols") +
                                               "), so text outside the kept tokens could not be tokenized");
  if (missing == 0) return 0;
  auto covered = [&](std::string_view c) {
    if (!tok.is_spm()) {
      const auto it = symbol_byte.find(std::string(c));
      return it == symbol_byte.end() || has[it->second];  // other characters never occur in input
    }
    return std::all_of(c.begin(), c.end(), [&](char b) { return has[uint8_t(b)]; });
  };
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const std::string_view t = vocab.tokens[i];
    for (size_t off = 0; off < t.size();) {
      const size_t len = std::min(t.size() - off, utf8_len_from_lead(uint8_t(t[off])));
      const std::string_view c = t.substr(off, len);
      off += len;
      if (covered(c)) continue;
      const TokenId own = tok.find_token(c);
      keep(own >= 0 ? own : TokenId(i));
    }
  }
  return missing;
}

// BPE closure over strings: every part of every merge whose result is kept, recursively.
// Strings, not ids, because a merge's parts are matched by text (and an odd vocabulary may
// merge into a string that is not a token; it stays a symbol all the same).
std::unordered_set<std::string> bpe_closure(const VocabData& vocab, const VocabTokenizer& tok,
                                            std::vector<uint8_t>& why) {
  std::unordered_map<std::string, std::vector<uint32_t>> by_result;  // a + b -> merge indices
  by_result.reserve(vocab.merges.size());
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    std::string_view a, b;
    if (!split_merge(vocab.merges[i], &a, &b)) continue;
    std::string r(a);
    r += b;
    by_result[r].push_back(uint32_t(i));
  }
  std::unordered_set<std::string> kept;
  std::deque<std::string> todo;
  for (size_t i = 0; i < why.size(); ++i)
    if (why[i] != kDropped && kept.insert(vocab.tokens[i]).second) todo.push_back(vocab.tokens[i]);
  while (!todo.empty()) {
    const std::string s = std::move(todo.front());
    todo.pop_front();
    const auto it = by_result.find(s);
    if (it == by_result.end()) continue;
    for (const uint32_t m : it->second) {
      std::string_view parts[2];
      split_merge(vocab.merges[m], &parts[0], &parts[1]);
      for (const std::string_view p : parts) {
        if (!kept.emplace(p).second) continue;
        todo.emplace_back(p);
        const TokenId id = tok.find_token(p);
        if (id >= 0 && why[size_t(id)] == kDropped) why[size_t(id)] = kClosure;
      }
    }
  }
  return kept;
}

// Character boundaries as the SentencePiece merge splits a word (encode.cpp split_chars).
std::vector<size_t> char_ends(std::string_view s) {
  std::vector<size_t> ends;
  for (size_t off = 0; off < s.size();) {
    off += std::min(s.size() - off, utf8_len_from_lead(uint8_t(s[off])));
    ends.push_back(off);
  }
  return ends;
}

// SentencePiece closure over ids: a symbol is a single character or a token (merges only ever
// make tokens), so every split of a kept token into two possible symbols is a way the merge
// can have built it; the token halves of each are kept, recursively.
void spm_closure(const VocabData& vocab, const VocabTokenizer& tok, std::vector<uint8_t>& why) {
  auto symbol = [&](std::string_view s) {
    return tok.find_token(s) >= 0 || utf8_len_from_lead(uint8_t(s[0])) >= s.size();
  };
  std::deque<TokenId> todo;
  for (size_t i = 0; i < why.size(); ++i)
    if (why[i] != kDropped) todo.push_back(TokenId(i));
  while (!todo.empty()) {
    const std::string_view s = vocab.tokens[size_t(todo.front())];
    todo.pop_front();
    const std::vector<size_t> ends = char_ends(s);
    for (size_t k = 0; k + 1 < ends.size(); ++k) {
      const std::string_view l = s.substr(0, ends[k]), r = s.substr(ends[k]);
      if (!symbol(l) || !symbol(r)) continue;
      for (const std::string_view p : {l, r}) {
        const TokenId id = tok.find_token(p);
        if (id >= 0 && why[size_t(id)] == kDropped) {
          why[size_t(id)] = kClosure;
          todo.push_back(id);
        }
      }
    }
  }
}

std::string read_text(const std::string& path, Status* code, std::string* err) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    *code = Status::io_error, *err = path + " is a directory, not a text file";
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  if (in) ss << in.rdbuf();
  if (!in || in.bad()) {
    *code = Status::io_error, *err = "cannot read " + path;
    return {};
  }
  return ss.str();
}

}  // namespace

Result<VocabPrune> plan_vocab_prune(const VocabData& vocab, const std::vector<TokenId>& wanted,
                                    const std::vector<TokenId>& special_ids) {
  if (vocab.model != "gpt2" && vocab.model != "llama")
    return make_error(Status::unsupported, "vocabulary pruning supports the gpt2 (byte-level BPE) and llama "
                                           "(SentencePiece) tokenizers, not '" + vocab.model + "'");
  // The tokenizer as the engine builds it: which tokens it treats as special goes beyond
  // token_type (end markers recognised by their text), and its default ids.
  PLLM_ASSIGN(std::unique_ptr<VocabTokenizer> tok, VocabTokenizer::create(vocab));
  const size_t n = vocab.tokens.size();
  VocabPrune v;
  v.n_before = n;
  v.merges_before = vocab.merges.size();
  std::vector<uint8_t> why(n, kDropped);
  for (const TokenId id : wanted) {
    if (id < 0 || size_t(id) >= n) return make_error(Status::invalid_argument, "token id out of range");
    why[size_t(id)] = kText;
  }
  auto special = [&](TokenId id) {
    if (id >= 0 && size_t(id) < n && why[size_t(id)] == kDropped) why[size_t(id)] = kSpecial;
  };
  for (size_t i = 0; i < n; ++i) {
    const bool typed = !vocab.types.empty() && vocab.types[i] != int32_t(TokenType::normal);
    if (typed || (tok->token_attr(TokenId(i)) & ~uint32_t(kAttrNormal)) != 0) special(TokenId(i));
  }
  for (const TokenId id : {tok->bos(), tok->eos(), tok->eot(), tok->eom(), tok->unk(), tok->pad()}) special(id);
  for (const TokenId id : special_ids) special(id);
  PLLM_ASSIGN(v.bytes_missing, keep_byte_fallback(vocab, *tok, why));

  std::unordered_set<std::string> kept_strings;
  if (tok->is_spm())
    spm_closure(vocab, *tok, why);
  else
    kept_strings = bpe_closure(vocab, *tok, why);

  v.new_id.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (why[i] == kDropped) continue;
    v.new_id[i] = TokenId(v.keep.size());
    v.keep.push_back(TokenId(i));
    (why[i] == kText ? v.from_text : why[i] == kSpecial ? v.from_special : v.from_closure) += 1;
  }
  // Merges survive when both parts and the result are kept; their order (the ranks) stays.
  if (!tok->is_spm()) {
    for (size_t i = 0; i < vocab.merges.size(); ++i) {
      std::string_view a, b;
      if (!split_merge(vocab.merges[i], &a, &b)) continue;
      std::string r(a);
      r += b;
      if (kept_strings.count(std::string(a)) && kept_strings.count(std::string(b)) && kept_strings.count(r))
        v.kept_merges.push_back(uint32_t(i));
    }
  }

  VocabData& p = v.pruned;
  p.model = vocab.model, p.pre = vocab.pre, p.name = vocab.name;
  p.add_bos = vocab.add_bos, p.add_eos = vocab.add_eos, p.add_space_prefix = vocab.add_space_prefix;
  for (const TokenId id : v.keep) {
    p.tokens.push_back(vocab.tokens[size_t(id)]);
    if (!vocab.scores.empty()) p.scores.push_back(vocab.scores[size_t(id)]);
    if (!vocab.types.empty()) p.types.push_back(vocab.types[size_t(id)]);
  }
  for (const uint32_t m : v.kept_merges) p.merges.push_back(vocab.merges[m]);
  // bos/eos/unk: the ids the tokenizer resolved (its defaults are ids, and ids move; an id the
  // file names out of range is ignored in favour of the default). The rest: an id in range is
  // kept as a special, so it maps; one out of range stays, meaning nothing before and after.
  auto resolved = [&](const std::optional<TokenId>& id, TokenId used) -> std::optional<TokenId> {
    return used >= 0 ? std::optional<TokenId>(v.new_id[size_t(used)]) : id;
  };
  auto remap = [&](const std::optional<TokenId>& id) -> std::optional<TokenId> {
    return id && *id >= 0 && size_t(*id) < n ? std::optional<TokenId>(v.new_id[size_t(*id)]) : id;
  };
  p.bos = resolved(vocab.bos, tok->bos());
  p.eos = resolved(vocab.eos, tok->eos());
  p.unk = resolved(vocab.unk, tok->unk());
  p.eot = remap(vocab.eot);
  p.eom = remap(vocab.eom);
  p.pad = remap(vocab.pad);
  return v;
}

std::vector<TokenId> most_frequent_tokens(const std::vector<TokenId>& ids, size_t n) {
  std::unordered_map<TokenId, uint64_t> count;
  for (const TokenId id : ids) ++count[id];
  std::vector<std::pair<TokenId, uint64_t>> order(count.begin(), count.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  std::vector<TokenId> top;
  for (size_t i = 0; i < order.size() && i < n; ++i) top.push_back(order[i].first);
  return top;
}

Result<VocabKeepArg> parse_vocab_keep(const std::string& arg) {
  VocabKeepArg a;
  std::error_code ec;
  size_t digits = arg.size() && (arg[0] == '+' || arg[0] == '-') ? 1 : 0;
  const bool integer = arg.size() > digits &&
                       std::all_of(arg.begin() + ptrdiff_t(digits), arg.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (arg.empty() || std::filesystem::exists(arg, ec) || !integer) {
    a.file = arg;
    return a;
  }
  // Beyond 18 digits it is out of any vocabulary's range anyway.
  if (arg[0] == '-' || arg.size() - digits > 18 || std::stoll(arg.substr(digits)) < 1)
    return make_error(Status::invalid_argument, "--vocab-keep " + arg + ": N must be at least 1 (or name an existing file)");
  a.top_n = std::stoll(arg.substr(digits));
  return a;
}

Result<VocabPrune> plan_vocab_keep(const GgufFile& f, const Tokenizer& tok, const std::string& arg,
                                   const std::string& calib_path) {
  PLLM_ASSIGN(const VocabKeepArg a, parse_vocab_keep(arg));
  PLLM_ASSIGN(VocabData vocab, vocab_data_from_gguf(f));
  if (a.top_n > 0) {
    if (uint64_t(a.top_n) > vocab.tokens.size())
      return make_error(Status::invalid_argument, "--vocab-keep " + arg + " is more than the vocabulary's " +
                                                      std::to_string(vocab.tokens.size()) + " tokens");
    if (calib_path.empty())
      return make_error(Status::invalid_argument, "--vocab-keep " + arg + " keeps the " + arg +
                                                      " most frequent tokens of the --calib text: give --calib TEXT "
                                                      "(or name a file: ./" + arg + ")");
  }
  const std::string& path = a.top_n > 0 ? calib_path : a.file;
  const char* what = a.top_n > 0 ? "--calib" : "--vocab-keep";
  Status code = Status::ok;
  std::string err;
  const std::string text = read_text(path, &code, &err);
  if (code != Status::ok) return make_error(code, std::string(what) + ": " + err);
  if (text.empty()) return make_error(Status::invalid_argument, std::string(what) + ": " + path + " is empty");
  // Plain text: no BOS, special-token text tokenized as text (the specials are kept anyway).
  PLLM_ASSIGN(const std::vector<TokenId> ids, tok.encode(text, false, false));
  const std::vector<TokenId> wanted = a.top_n > 0 ? most_frequent_tokens(ids, size_t(a.top_n)) : ids;

  // Every id a *_token_id key names stays (and keeps being named, remapped).
  std::vector<TokenId> named;
  for (const auto& [key, value] : f.metadata()) {
    if (!starts_with(key, "tokenizer.ggml.") || !ends_with(key, "_token_id")) continue;
    auto id = f.get_u64(key);
    if (id.ok() && *id < vocab.tokens.size()) named.push_back(TokenId(*id));
  }
  PLLM_ASSIGN(VocabPrune v, plan_vocab_prune(vocab, wanted, named));
  const std::string name = std::filesystem::path(path).filename().string();
  v.source = a.top_n > 0 ? "top " + std::to_string(a.top_n) + " of " + name : name;
  return v;
}

Result<void> write_vocab_metadata(GgufWriter& out, const GgufFile& f, const VocabPrune& v,
                                  const std::string& arch_prefix) {
  auto select = [](const GgufValue& value, auto&& indices) {
    GgufValue sel;
    sel.type = value.type, sel.elem_type = value.elem_type;
    for (const auto i : indices) sel.items.push_back(value.items[size_t(i)]);
    return sel;
  };
  for (const auto& [key, value] : f.metadata()) {
    if (!starts_with(key, "tokenizer.")) continue;
    const bool array = value.type == GgufType::array;
    if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type") {
      if (!array || value.array_len() != v.n_before)
        return make_error(Status::bad_format, key + " does not have one entry per token");
      out.set_value(key, select(value, v.keep));
    } else if (key == "tokenizer.ggml.merges") {
      if (!array || value.array_len() != v.merges_before)
        return make_error(Status::bad_format, key + " is not the merge list the keep set was planned on");
      out.set_value(key, select(value, v.kept_merges));
    } else if (ends_with(key, "_token_id") && !array) {
      GgufValue id = value;  // same GGUF type as before
      int64_t old = -1;
      if (const auto* u = std::get_if<uint64_t>(&id.scalar)) old = *u < v.n_before ? int64_t(*u) : -1;
      if (const auto* s = std::get_if<int64_t>(&id.scalar)) old = *s >= 0 && uint64_t(*s) < v.n_before ? *s : -1;
      if (old < 0) continue;  // not an id in range: it meant nothing before and still does not
      const TokenId now = v.new_id[size_t(old)];
      if (now < 0) return make_error(Status::internal, key + " names a token that was dropped");
      if (std::holds_alternative<uint64_t>(id.scalar)) id.scalar = uint64_t(now);
      else id.scalar = int64_t(now);
      out.set_value(key, id);
    } else if (array && value.array_len() == v.n_before) {
      return make_error(Status::unsupported, key + " has one entry per token and the pruner does not know it");
    }
  }
  // The ids the tokenizer took by default (no key in the file, or one out of range): written
  // explicitly, as the defaults are ids and would now name other tokens.
  const std::pair<const char*, std::optional<TokenId>> defaults[] = {{"tokenizer.ggml.bos_token_id", v.pruned.bos},
                                                                     {"tokenizer.ggml.eos_token_id", v.pruned.eos},
                                                                     {"tokenizer.ggml.unknown_token_id", v.pruned.unk}};
  for (const auto& [key, id] : defaults) {
    bool valid = false;
    if (f.find(key)) {
      auto named = f.get_u64(key);
      valid = named.ok() && *named < v.n_before;
    }
    if (!valid && id && *id >= 0) out.set_u32(key, uint32_t(*id));
  }

  PLLM_ASSIGN(const std::string arch, f.get_string("general.architecture"));
  if (const GgufValue* vs = f.find(arch + ".vocab_size"); vs && vs->type != GgufType::array) {
    GgufValue size = *vs;
    if (std::holds_alternative<int64_t>(size.scalar)) size.scalar = int64_t(v.keep.size());
    else size.scalar = uint64_t(v.keep.size());
    out.set_value(arch_prefix + "vocab_size", size);
  }
  out.set_u32("pocketllm.prune.vocab_before", uint32_t(v.n_before));
  out.set_string("pocketllm.prune.vocab_source", v.source);
  return {};
}

Result<bool> add_vocab_tensor(GgufWriter& out, const TensorInfo& t, const VocabPrune& v,
                              std::optional<TensorType> requant_to, QuantMethod method,
                              const std::vector<float>& importance, int n_threads) {
  const bool per_token = t.dims.size() >= 2 && t.dims.back() == v.n_before;
  if (t.name != "token_embd.weight" && t.name != "output.weight") {
    if (per_token)
      return make_error(Status::unsupported, "tensor '" + t.name + "' has a row per token and the pruner does not "
                                             "know how to prune it");
    return false;
  }
  if (t.dims.size() != 2 || !per_token)
    return make_error(Status::bad_format, "tensor '" + t.name + "' is not [n_embd, " + std::to_string(v.n_before) + "]");
  const uint64_t cols = t.dims[0], rows = v.keep.size();
  const auto rb = row_bytes(t.type, cols);
  if (!rb) return make_error(Status::bad_format, "tensor '" + t.name + "': rows are not whole blocks");
  if (requant_to && uint32_t(*requant_to) != t.type) {
    // The head re-quantised anyway (--output-type): only its kept rows.
    std::vector<float> x(size_t(rows * cols));
    for (uint64_t r = 0; r < rows; ++r)
      if (!dequantize_row_any(t.type, t.data + size_t(v.keep[r]) * size_t(*rb), x.data() + r * cols, int64_t(cols)))
        return make_error(Status::unsupported, "tensor '" + t.name + "': the quantiser cannot read its type");
    ThreadPool pool(n_threads > 0 ? n_threads : default_thread_count());
    std::vector<uint8_t> q = quantize_matrix(x.data(), int64_t(rows), int64_t(cols), *requant_to, method,
                                             importance.empty() ? nullptr : importance.data(), pool);
    PLLM_TRY(out.add_tensor(t.name, uint32_t(*requant_to), {cols, rows}, std::move(q)));
    return true;
  }
  std::vector<uint8_t> bytes(size_t(*rb * rows));  // whole rows: blocks never cross a row
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(bytes.data() + r * *rb, t.data + size_t(v.keep[r]) * size_t(*rb), size_t(*rb));
  PLLM_TRY(out.add_tensor(t.name, t.type, {cols, rows}, std::move(bytes)));
  return true;
}

}  // namespace pllm
