// Vocabulary set-up (llama.cpp defaults and special-token rules), special-token
// partitioning, encode/decode entry points, GGUF loading and StreamDecoder.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tokenizer/vocab.h"

namespace pllm {

namespace {

uint32_t attr_from_type(int32_t t) {
  switch (static_cast<TokenType>(t)) {
    case TokenType::normal: return kAttrNormal;
    case TokenType::unknown: return kAttrUnknown;
    case TokenType::control: return kAttrControl;
    case TokenType::user_defined: return kAttrUserDefined;
    case TokenType::unused: return kAttrUnused;
    case TokenType::byte: return kAttrByte;
    default: return kAttrUndefined;  // undefined or out-of-range types
  }
}

bool one_of(const std::string& s, std::initializer_list<const char*> list) {
  for (const char* x : list)
    if (s == x) return true;
  return false;
}

}  // namespace

Result<std::unique_ptr<VocabTokenizer>> VocabTokenizer::create(VocabData d) {
  std::unique_ptr<VocabTokenizer> t(new VocabTokenizer());
  if (d.model == "llama") {
    t->spm_ = true;
  } else if (d.model == "gemma4") {
    t->sp_bpe_ = true;
  } else if (d.model != "gpt2") {
    return make_error(Status::unsupported, "unsupported tokenizer model '" + d.model + "'");
  }
  const size_t n = d.tokens.size();
  if (n == 0) return make_error(Status::bad_format, "tokenizer has no tokens");
  if (!d.scores.empty() && d.scores.size() < n)
    return make_error(Status::bad_format, "tokenizer.ggml.scores shorter than the token list");
  if (!d.types.empty() && d.types.size() < n)
    return make_error(Status::bad_format, "tokenizer.ggml.token_type shorter than the token list");

  t->text_ = std::move(d.tokens);
  t->score_.assign(n, 0.0f);
  t->attr_.assign(n, kAttrNormal);
  t->to_id_.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    if (t->text_[i].empty()) t->text_[i] = "[EMPTY_" + std::to_string(i) + "]";
    t->to_id_.emplace(t->text_[i], static_cast<TokenId>(i));  // first occurrence wins
    if (!d.scores.empty()) t->score_[i] = d.scores[i];
    if (!d.types.empty()) t->attr_[i] = attr_from_type(d.types[i]);
  }

  // Model-type defaults (llama.cpp): SPM bos=1 eos=2 unk=0, add_bos, space prefix;
  // byte-level BPE bos=eos=11 and add_bos per pre-tokenizer.
  if (t->spm_) {
    t->bos_ = 1, t->eos_ = 2, t->unk_ = 0;
    t->add_bos_ = true, t->add_eos_ = false, t->add_space_prefix_ = true;
  } else if (t->sp_bpe_) {
    // gemma4: the file names its special tokens (no defaults); the pre-tokenizer is fixed
    // whatever tokenizer.ggml.pre says.
    t->pre_.type = PreType::gemma4;
    t->bos_ = t->eos_ = t->unk_ = -1;
    t->add_bos_ = true, t->add_eos_ = false, t->add_space_prefix_ = false;
  } else {
    PLLM_ASSIGN(t->pre_, resolve_pre_type(d.pre));
    t->bos_ = 11, t->eos_ = 11, t->unk_ = -1;
    if (t->pre_.no_default_bos) t->bos_ = -1;
    t->add_bos_ = t->pre_.add_bos, t->add_eos_ = false, t->add_space_prefix_ = false;
  }
  auto in_range = [n](TokenId id) { return id >= 0 && static_cast<size_t>(id) < n; };
  for (TokenId* id : {&t->bos_, &t->eos_, &t->unk_})
    if (!in_range(*id)) *id = -1;
  auto set_id = [&](const std::optional<TokenId>& v, TokenId& dst) {
    if (v && in_range(*v)) dst = *v;
  };
  set_id(d.bos, t->bos_);
  set_id(d.eos, t->eos_);
  set_id(d.eot, t->eot_);
  set_id(d.eom, t->eom_);
  set_id(d.unk, t->unk_);
  set_id(d.pad, t->pad_);
  // llama.cpp forces add_bos on for gemma4 files that say false (its PR 21500).
  if (d.add_bos) t->add_bos_ = *d.add_bos || t->sp_bpe_;
  if (d.add_eos) t->add_eos_ = *d.add_eos;
  if (d.add_space_prefix && t->spm_) t->add_space_prefix_ = *d.add_space_prefix;
  if (t->add_bos_ && t->bos_ < 0) t->add_bos_ = false;
  if (t->add_eos_ && t->eos_ < 0) t->add_eos_ = false;

  if (!t->spm_) {
    t->ranks_.reserve(d.merges.size() * 2);
    for (size_t i = 0; i < d.merges.size(); ++i) {
      const std::string& m = d.merges[i];
      const size_t pos = m.find(' ', 1);
      std::string_view first, second;
      if (pos != std::string::npos) {
        first = std::string_view(m).substr(0, pos);
        second = std::string_view(m).substr(pos + 1);
      }
      t->ranks_.emplace(bpe_rank_key(first, second), static_cast<int>(i));  // first wins
    }
    PLLM_ASSIGN(t->splitter_, RegexSplitter::create(pre_regexes(t->pre_.type)));
  }

  // Tokens recognised by their text (as llama.cpp does): EOT/EOM/FIM candidates become
  // control tokens; a fixed list of end markers joins the end-of-generation set.
  TokenId fim_pad = -1, fim_rep = -1, fim_sep = -1, fim_pre = -1, fim_suf = -1, fim_mid = -1;
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = t->text_[i];
    const auto id = static_cast<TokenId>(i);
    auto mark = [&](TokenId& slot, bool match) {
      if (slot < 0 && match) {
        slot = id;
        t->attr_[i] |= kAttrControl;
      }
    };
    mark(t->eot_, one_of(s, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                             "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                             "<｜end▁of▁sentence｜>", "<end_of_utterance>"}));
    mark(t->eom_, s == "<|eom_id|>");
    mark(fim_pre, one_of(s, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                             "<PRE>", "▁<PRE>"}));
    mark(fim_suf, one_of(s, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                             "<SUF>", "▁<SUF>"}));
    mark(fim_mid, one_of(s, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                             "<MID>", "▁<MID>"}));
    mark(fim_pad, one_of(s, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}));
    mark(fim_rep, one_of(s, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}));
    mark(fim_sep, s == "<|file_sep|>");
  }
  for (const TokenId id : {fim_pad, fim_rep, fim_sep})
    if (id >= 0) t->eog_.insert(id);
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = t->text_[i];
    if ((t->attr_[i] & kAttrControl) && s.find("unused") != std::string::npos)
      t->attr_[i] |= kAttrUnused;
    if (one_of(s, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                   "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                   "<end_of_utterance>", "<｜end▁of▁sentence｜>",
                   "<eos>", "<turn|>", "<|tool_response>"})) {  // the last three: gemma4's
      t->eog_.insert(static_cast<TokenId>(i));
      t->attr_[i] |= kAttrControl;
    }
    if (one_of(s, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}))
      t->attr_[i] = kAttrUserDefined;
  }
  for (const TokenId id : {t->eos_, t->eot_, t->eom_})
    if (id >= 0) t->eog_.insert(id);

  // Special tokens split out before the model runs: longest text first.
  for (size_t i = 0; i < n; ++i)
    if (t->attr_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      t->special_cache_.push_back(static_cast<TokenId>(i));
  std::stable_sort(t->special_cache_.begin(), t->special_cache_.end(), [&](TokenId a, TokenId b) {
    return t->text_[a].size() > t->text_[b].size();
  });

  // Phi-3: special tokens swallow the whitespace to their right (llama.cpp rule).
  std::string lname = d.name;
  for (char& c : lname) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lname.find("phi-3") != std::string::npos || lname.find("phi3") != std::string::npos) {
    for (const TokenId id : t->special_cache_) t->attr_[id] |= kAttrRstrip;
    if (TokenId id = t->find_token("</s>"); id >= 0) t->attr_[id] |= kAttrRstrip;
    for (const char* s : {"<unk>", "<s>", "<|endoftext|>"})
      if (TokenId id = t->find_token(s); id >= 0) t->attr_[id] &= ~kAttrRstrip;
  }
  return t;
}

TokenId VocabTokenizer::find_token(std::string_view text) const {
  const auto it = to_id_.find(text);
  return it == to_id_.end() ? -1 : it->second;
}

std::vector<VocabTokenizer::Fragment> VocabTokenizer::partition(std::string_view text,
                                                                bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({false, -1, 0, text.size()});
  std::vector<Fragment> next;
  for (const TokenId id : special_cache_) {
    const uint32_t attr = attr_[id];
    // Control/unknown tokens only with parse_special; user-defined ones always.
    if (!parse_special && (attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = text_[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      size_t off = f.off, len = f.len;
      while (len > 0) {
        const size_t match = text.substr(0, off + len).find(tok, off);
        if (match == std::string_view::npos) {
          next.push_back({false, -1, off, len});
          break;
        }
        size_t left_len = match - off;
        if (attr & kAttrLstrip)
          while (left_len > 0 && std::isspace(static_cast<unsigned char>(text[off + left_len - 1])))
            --left_len;
        if (left_len > 0) next.push_back({false, -1, off, left_len});
        next.push_back({true, id, 0, 0});
        size_t roff = match + tok.size();
        size_t rlen = off + len - roff;
        if (attr & kAttrRstrip)
          while (rlen > 0 && std::isspace(static_cast<unsigned char>(text[roff]))) ++roff, --rlen;
        off = roff;
        len = rlen;
      }
    }
    frags.swap(next);
  }
  return frags;
}

Result<std::vector<TokenId>> VocabTokenizer::encode(std::string_view text, bool add_special,
                                                    bool parse_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  const std::vector<Fragment> frags = partition(text, parse_special);
  if (add_special && add_bos_) out.push_back(bos_);
  bool prev_special = true;  // SPM: a space prefix goes before the first text fragment
  for (const Fragment& f : frags) {
    if (f.is_token) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    const std::string_view piece = text.substr(f.off, f.len);
    if (spm_) {
      std::string s;
      s.reserve(piece.size() * 3 / 2 + 3);
      if (add_space_prefix_ && prev_special) s += "\xE2\x96\x81";
      for (const char c : piece) {
        if (c == ' ')
          s += "\xE2\x96\x81";
        else
          s += c;
      }
      spm_tokenize(s, out);
    } else {
      bpe_tokenize(piece, out);
    }
    prev_special = false;
  }
  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

std::string VocabTokenizer::token_to_piece(TokenId id, bool render_special) const {
  if (id < 0 || static_cast<size_t>(id) >= text_.size()) return {};
  const uint32_t attr = attr_[id];
  const std::string& s = text_[id];
  if (attr & (kAttrControl | kAttrUnknown)) return render_special ? s : std::string();
  if (attr & kAttrUserDefined) return s;
  auto parse_byte = [&](std::string& out) {
    if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
      out.assign(1, static_cast<char>(std::strtol(s.substr(3, 2).c_str(), nullptr, 16)));
      return true;
    }
    return false;
  };
  std::string out;
  if (attr & kAttrByte) {
    if (parse_byte(out)) return out;
    if (spm_ || sp_bpe_) return s;
  }
  if (!(attr & (kAttrNormal | kAttrByte))) return {};  // unused / undefined: suppressed
  if (spm_ || sp_bpe_) {
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  }
  // Byte-level BPE: map each code point back to its byte; code points outside the
  // mapping are kept as their UTF-8.
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    const size_t len = std::min(s.size() - i, utf8_len_from_lead(b0));
    uint32_t cp = b0;
    if (len == 2) cp = ((b0 & 0x1F) << 6) | (s[i + 1] & 0x3F);
    const int b = len <= 2 ? unicode_to_byte(cp) : -1;
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(s, i, len);
    i += len;
  }
  return out;
}

// ---- GGUF ---------------------------------------------------------------------------------

Result<VocabData> vocab_data_from_gguf(const GgufFile& f) {
  VocabData d;
  PLLM_ASSIGN(d.model, f.get_string("tokenizer.ggml.model"));
  PLLM_ASSIGN(d.pre, f.get_string_or("tokenizer.ggml.pre", ""));
  PLLM_ASSIGN(d.name, f.get_string_or("general.name", ""));
  {
    PLLM_ASSIGN(auto toks, f.get_string_array("tokenizer.ggml.tokens"));
    d.tokens.assign(toks.begin(), toks.end());
  }
  if (f.find("tokenizer.ggml.scores")) {
    PLLM_ASSIGN(auto sc, f.get_f64_array("tokenizer.ggml.scores"));
    d.scores.assign(sc.begin(), sc.end());
  }
  if (f.find("tokenizer.ggml.token_type")) {
    PLLM_ASSIGN(auto ty, f.get_i64_array("tokenizer.ggml.token_type"));
    d.types.reserve(ty.size());
    for (const int64_t v : ty) d.types.push_back(static_cast<int32_t>(v));
  }
  if (f.find("tokenizer.ggml.merges")) {
    PLLM_ASSIGN(auto m, f.get_string_array("tokenizer.ggml.merges"));
    d.merges.assign(m.begin(), m.end());
  } else if (d.model == "gpt2" || d.model == "gemma4") {
    return make_error(Status::bad_format, "tokenizer.ggml.merges missing in " + f.path());
  }
  // Ids that are absent, negative or of an odd type keep the model default.
  auto opt_id = [&](const char* key, std::optional<TokenId>& dst) {
    if (!f.find(key)) return;
    auto r = f.get_u64(key);
    if (r.ok() && *r < (1ull << 31)) dst = static_cast<TokenId>(*r);
  };
  opt_id("tokenizer.ggml.bos_token_id", d.bos);
  opt_id("tokenizer.ggml.eos_token_id", d.eos);
  opt_id("tokenizer.ggml.eot_token_id", d.eot);
  opt_id("tokenizer.ggml.eom_token_id", d.eom);
  opt_id("tokenizer.ggml.unknown_token_id", d.unk);
  opt_id("tokenizer.ggml.padding_token_id", d.pad);
  auto opt_bool = [&](const char* key, std::optional<bool>& dst) -> Result<bool> {
    if (!f.find(key)) return false;
    PLLM_ASSIGN(dst, f.get_bool(key));
    return true;
  };
  PLLM_TRY(opt_bool("tokenizer.ggml.add_bos_token", d.add_bos));
  PLLM_TRY(opt_bool("tokenizer.ggml.add_eos_token", d.add_eos));
  PLLM_TRY(opt_bool("tokenizer.ggml.add_space_prefix", d.add_space_prefix));
  return d;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  PLLM_ASSIGN(auto data, vocab_data_from_gguf(file));
  auto t = VocabTokenizer::create(std::move(data));
  if (!t.ok()) return make_error(t.error().code, t.error().message + " (" + file.path() + ")");
  return std::unique_ptr<Tokenizer>(std::move(t).value());
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string out;
  for (const TokenId id : ids) out += token_to_piece(id, render_special);
  return out;
}

// ---- streaming ----------------------------------------------------------------------------

std::string StreamDecoder::push(TokenId id) {
  pending_ += tok_.token_to_piece(id);
  const size_t n = utf8_complete_prefix(pending_);
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace pllm
