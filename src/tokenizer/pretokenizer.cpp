// Pre-tokenizer regexes per tokenizer.ggml.pre, the PCRE2-based splitter, UTF-8 and
// GPT-2 byte<->unicode helpers.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

#include "tokenizer/vocab.h"

namespace pllm {

// ---- UTF-8 -----------------------------------------------------------------------

size_t utf8_len_from_lead(uint8_t c) {
  static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Validates one UTF-8 character at s[i]. Returns its length (>0) when valid and
// complete, 0 when the bytes present are a valid but unfinished prefix, -1 if invalid.
int utf8_check(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  int n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return -1;
  }
  return n;
}

}  // namespace

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const int n = utf8_check(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const int n = utf8_check(s, i);
    if (n == 0) return i;  // unfinished tail
    i += n > 0 ? n : 1;
  }
  return i;
}

// ---- GPT-2 byte mapping ---------------------------------------------------------------

namespace {
struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<int, 512> from_cp;  // code points used are < 324
  ByteMap() {
    from_cp.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool direct = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = direct ? b : 256 + extra++;
      append_utf8(to_utf8[b], cp);
      from_cp[cp] = b;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_utf8[b]; }
int unicode_to_byte(uint32_t cp) { return cp < 512 ? byte_map().from_cp[cp] : -1; }

// ---- pre-tokenizer tables ---------------------------------------------------------------

Result<PreConfig> resolve_pre_type(const std::string& pre) {
  PreConfig c;
  auto is = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (pre == n) return true;
    return false;
  };
  if (pre.empty() || pre == "default") {
    c.type = PreType::default_;
  } else if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                 "midm-2.0", "lfm2"})) {
    c.type = PreType::llama3;
    c.ignore_merges = true;
    c.add_bos = true;
  } else if (is({"dbrx", "smaug-bpe"})) {
    c.type = PreType::llama3;
  } else if (pre == "deepseek-llm") {
    c.type = PreType::deepseek_llm;
  } else if (pre == "deepseek-coder") {
    c.type = PreType::deepseek_coder;
  } else if (pre == "deepseek-v3") {
    c.type = PreType::deepseek3;
  } else if (pre == "falcon") {
    c.type = PreType::falcon;
  } else if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                 "minerva-7b"})) {
    c.type = PreType::starcoder;
  } else if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
                 "jina-v2-de", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo",
                 "jais", "trillion", "exaone4", "a.x-4.0", "mellum", "granite-docling"})) {
    c.type = PreType::gpt2;
  } else if (is({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"})) {
    c.type = PreType::qwen2;
  } else if (is({"poro-chat", "bloom", "gpt3-finnish"})) {
    c.type = PreType::bloom;
  } else if (pre == "viking") {
    c.type = PreType::viking;
  } else if (is({"chatglm-bpe", "glm4"})) {
    c.type = PreType::chatglm4;
    c.no_default_bos = true;
  } else if (pre == "tekken") {
    c.type = PreType::tekken;
    c.ignore_merges = true;
    c.add_bos = true;
  } else if (is({"gpt-4o", "llama4"})) {
    c.type = PreType::gpt4o;
  } else {
    return make_error(Status::unsupported, "unknown pre-tokenizer type '" + pre + "'");
  }
  return c;
}

const std::vector<std::string>& pre_regexes(PreType t) {
  // The contraction alternatives are written case-explicitly (as llama.cpp adapts the
  // models' (?i:...) groups).
  static const std::string kGpt2 =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
  static const std::string kContr = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
  static const std::string kLlama3 =
      kContr + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string kQwen2 =
      kContr + R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const std::string kUpperLower =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)";
  static const std::string kUpperLower2 =
      R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)";
  static const std::vector<std::string> kDefault = {
      R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  static const std::vector<std::string> kGpt2Set = {kGpt2};
  static const std::vector<std::string> kLlama3Set = {kLlama3};
  static const std::vector<std::string> kQwen2Set = {kQwen2};
  static const std::vector<std::string> kStarcoder = {R"(\p{N})", kGpt2};
  static const std::vector<std::string> kFalcon = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2,
                                                   "[0-9][0-9][0-9]"};
  static const std::vector<std::string> kDeepseekLlm = {
      "[\r\n]",
      "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
      "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
      "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
      "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
      "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-"
      "\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
      "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
      "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
      "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-"
      "\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
      "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
      "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
      "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-"
      "\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
      "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}"
      "-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"
      "\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
      "\\s+$",
      "[一-龥ࠀ-一가-퟿]+",
      "\\p{N}+"};
  static const std::vector<std::string> kDeepseekCoder = {
      "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
  static const std::vector<std::string> kDeepseek3 = {
      "\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
  static const std::vector<std::string> kBloom = {" ?[^(\\s|.,!?…。，、।۔،)]+"};
  static const std::vector<std::string> kViking = {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"};
  static const std::vector<std::string> kTekken = {
      kUpperLower + "|" + kUpperLower2 +
      R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  static const std::vector<std::string> kGpt4o = {
      kUpperLower + kContr + "?|" + kUpperLower2 + kContr +
      R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  // gemma4: BPE runs over whole lines; only newlines split (llama.cpp's merge lookup must not
  // see them inside a word).
  static const std::vector<std::string> kGemma4 = {"[^\\n]+|[\\n]+"};
  switch (t) {
    case PreType::default_: return kDefault;
    case PreType::gpt2: return kGpt2Set;
    case PreType::llama3: return kLlama3Set;
    case PreType::chatglm4: return kLlama3Set;
    case PreType::qwen2: return kQwen2Set;
    case PreType::starcoder: return kStarcoder;
    case PreType::falcon: return kFalcon;
    case PreType::deepseek_llm: return kDeepseekLlm;
    case PreType::deepseek_coder: return kDeepseekCoder;
    case PreType::deepseek3: return kDeepseek3;
    case PreType::bloom: return kBloom;
    case PreType::viking: return kViking;
    case PreType::tekken: return kTekken;
    case PreType::gpt4o: return kGpt4o;
    case PreType::gemma4: return kGemma4;
  }
  return kDefault;
}

// ---- regex splitting ----------------------------------------------------------------------

// llama.cpp's whitespace set (the Unicode White_Space property).
static const char kWhiteBody[] =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string rewrite_whitespace_classes(const std::string& re) {
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char n = re[i + 1];
      if (n == 's') {
        out += inside ? std::string(kWhiteBody) : "[" + std::string(kWhiteBody) + "]";
      } else if (n == 'S' && !inside) {
        out += "[^" + std::string(kWhiteBody) + "]";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (c == '[' && !inside) {
      inside = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < re.size() && re[i + 1] == '^') out += re[++i];
      if (i + 1 < re.size() && re[i + 1] == ']') out += re[++i];
      continue;
    }
    if (c == ']' && inside) inside = false;
    out += c;
  }
  return out;
}

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::create(const std::vector<std::string>& regexes) {
  std::unique_ptr<RegexSplitter> s(new RegexSplitter());
  for (const auto& r : regexes) {
    const std::string pat = rewrite_whitespace_classes(r);
    int err = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &erroff,
                                     nullptr);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      return make_error(Status::internal, "pre-tokenizer regex failed to compile at " +
                                              std::to_string(erroff) + ": " +
                                              reinterpret_cast<char*>(buf));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    s->codes_.push_back(code);
  }
  return s;
}

RegexSplitter::~RegexSplitter() {
  for (void* c : codes_) pcre2_code_free(static_cast<pcre2_code*>(c));
}

std::vector<size_t> RegexSplitter::split(std::string_view text) const {
  std::vector<size_t> offsets;
  if (text.empty()) return offsets;
  offsets.push_back(text.size());
  const auto* subject_all = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (void* vc : codes_) {
    auto* code = static_cast<pcre2_code*>(vc);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    std::vector<size_t> next;
    next.reserve(offsets.size() * 2);
    size_t start = 0;
    for (const size_t len : offsets) {
      PCRE2_SPTR subject = subject_all + start;
      size_t pos = 0, last = 0;  // pos: search start; last: end of last emitted piece
      while (pos < len) {
        int rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)  // e.g. JIT stack exhausted: interpret
          rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (me == ms) {  // empty match: split there, then step one character
          if (ms >= len) break;
          if (ms > last) next.push_back(ms - last);
          last = ms;
          pos = ms + std::max<size_t>(1, utf8_len_from_lead(static_cast<uint8_t>(subject[ms])));
          continue;
        }
        if (ms > last) next.push_back(ms - last);
        next.push_back(me - ms);
        last = pos = me;
      }
      if (last < len) next.push_back(len - last);
      start += len;
    }
    pcre2_match_data_free(md);
    offsets.swap(next);
  }
  return offsets;
}

}  // namespace pllm
