// Per-tensor type rules (see type_plan.h).
#include "quantizer/type_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "quantizer/row_quant.h"

namespace pllm {

namespace {

using TT = TensorType;

// The tensors a mix rule can name (llama.cpp's categories; attn_v stands for attn_qkv and
// attn_kv_b too, as there).
enum class Category : uint8_t { other, attn_v, ffn_down, attn_output };

// When a rule applies: i is the tensor's ordinal among its kind, n their count (attn_v) or
// the block count (ffn_down).
enum class When : uint8_t { always, more_bits, first_eighth, first_sixteenth, first_two, first_four, gqa4 };

struct MixRule {
  QuantMix mix;
  Category cat;
  When when;
  TensorType type;
};

// llama.cpp's rules (llama_tensor_get_type, dense models, no importance matrix) for the
// mixes offered. Per (mix, category) the first rule whose condition holds wins; none: the
// base type.
constexpr MixRule kMixRules[] = {
    {QuantMix::q2_k, Category::attn_v, When::gqa4, TT::Q4_K},
    {QuantMix::q2_k, Category::attn_v, When::always, TT::Q3_K},
    {QuantMix::q2_k, Category::ffn_down, When::always, TT::Q3_K},
    {QuantMix::q2_k, Category::attn_output, When::always, TT::Q3_K},
    {QuantMix::q3_k_m, Category::attn_v, When::first_two, TT::Q5_K},
    {QuantMix::q3_k_m, Category::attn_v, When::always, TT::Q4_K},
    {QuantMix::q3_k_m, Category::ffn_down, When::first_sixteenth, TT::Q5_K},
    {QuantMix::q3_k_m, Category::ffn_down, When::always, TT::Q4_K},
    {QuantMix::q3_k_m, Category::attn_output, When::always, TT::Q4_K},
    {QuantMix::q4_k_s, Category::attn_v, When::first_four, TT::Q5_K},
    {QuantMix::q4_k_s, Category::ffn_down, When::first_eighth, TT::Q5_K},
    {QuantMix::q4_k_m, Category::attn_v, When::more_bits, TT::Q6_K},
    {QuantMix::q4_k_m, Category::ffn_down, When::more_bits, TT::Q6_K},
    {QuantMix::q5_k_m, Category::attn_v, When::more_bits, TT::Q6_K},
    {QuantMix::q5_k_m, Category::ffn_down, When::more_bits, TT::Q6_K},
    {QuantMix::iq4_nl, Category::attn_v, When::gqa4, TT::Q5_K},
    {QuantMix::iq4_nl, Category::ffn_down, When::first_eighth, TT::Q5_K},
    {QuantMix::iq4_xs, Category::attn_v, When::gqa4, TT::Q5_K},
    {QuantMix::iq4_xs, Category::ffn_down, When::first_eighth, TT::Q5_K},
};

struct MixName {
  const char* name;
  QuantMix mix;
  TensorType base;
  uint32_t file_type;  // LLAMA_FTYPE_MOSTLY_*
};
constexpr MixName kMixes[] = {
    {"q2_k", QuantMix::q2_k, TT::Q2_K, 10},       {"q3_k_m", QuantMix::q3_k_m, TT::Q3_K, 12},
    {"q4_k_s", QuantMix::q4_k_s, TT::Q4_K, 14},   {"q4_k_m", QuantMix::q4_k_m, TT::Q4_K, 15},
    {"q5_k_m", QuantMix::q5_k_m, TT::Q5_K, 17},   {"iq4_nl", QuantMix::iq4_nl, TT::IQ4_NL, 25},
    {"iq4_xs", QuantMix::iq4_xs, TT::IQ4_XS, 30},
};

Category category_of(std::string_view name) {
  auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Category::attn_v;
  if (has("attn_output.weight")) return Category::attn_output;
  if (has("ffn_down")) return Category::ffn_down;
  return Category::other;
}

// llama.cpp's layers that get more bits: the first and last eighth and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool holds(When when, int i, int n, int n_gqa) {
  switch (when) {
    case When::always: return true;
    case When::more_bits: return use_more_bits(i, n);
    case When::first_eighth: return i < n / 8;
    case When::first_sixteenth: return i < n / 16;
    case When::first_two: return i < 2;
    case When::first_four: return i < 4;
    case When::gqa4: return n_gqa >= 4;
  }
  return false;
}

// The mix's type for a tensor, or nullopt when no rule names it.
std::optional<TensorType> mix_type(std::string_view name, QuantMix mix, const MixShape& shape) {
  if (mix == QuantMix::none) return std::nullopt;
  const Category cat = category_of(name);
  if (cat == Category::other) return std::nullopt;
  const auto it = shape.ordinal.find(name);
  const int i = it == shape.ordinal.end() ? 0 : it->second;
  const int n = cat == Category::attn_v ? shape.n_attn_v : shape.n_layer;
  for (const MixRule& r : kMixRules)
    if (r.mix == mix && r.cat == cat && holds(r.when, i, n, shape.n_gqa)) return r.type;
  return std::nullopt;
}

// The block index of "blk.N.*" (-1 for other names).
int layer_of(std::string_view name) {
  int layer = -1;
  if (name.rfind("blk.", 0) != 0) return -1;
  const std::string s(name);
  return std::sscanf(s.c_str(), "blk.%d.", &layer) == 1 ? layer : -1;
}

}  // namespace

Result<QuantPreset> parse_quant_preset(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const MixName& m : kMixes)
    if (l == m.name) return QuantPreset{m.base, m.mix};
  auto t = parse_quant_type(s);
  if (!t.ok()) {
    std::string mixes;
    for (const MixName& m : kMixes) mixes += std::string(mixes.empty() ? "" : ", ") + m.name;
    return make_error(Status::invalid_argument, t.error().message + ", or a llama.cpp mix: " + mixes);
  }
  return QuantPreset{t.value(), QuantMix::none};
}

std::string quant_preset_name(const QuantPreset& p) {
  for (const MixName& m : kMixes)
    if (m.mix == p.mix && p.mix != QuantMix::none) return m.name;
  return quant_type_name(p.base);
}

MixShape mix_shape(const GgufFile& f) {
  MixShape sh;
  std::vector<std::pair<int, std::string>> attn_v, ffn_down;  // (layer, name)
  int max_layer = -1;
  for (const TensorInfo& t : f.tensors()) {
    const int layer = layer_of(t.name);
    max_layer = std::max(max_layer, layer);
    if (t.dims.size() != 2) continue;
    const Category c = category_of(t.name);
    if (c == Category::attn_v) attn_v.emplace_back(layer, t.name);
    if (c == Category::ffn_down) ffn_down.emplace_back(layer, t.name);
  }
  for (auto* kind : {&attn_v, &ffn_down}) {
    std::sort(kind->begin(), kind->end());
    for (size_t k = 0; k < kind->size(); ++k) sh.ordinal[(*kind)[k].second] = int(k);
  }
  sh.n_attn_v = int(attn_v.size());
  // llama.cpp takes ffn_down's fractions of the block count. Keys missing or of another type
  // leave the defaults (a file the engine loads has them right).
  const auto arch_r = f.get_string("general.architecture");
  const std::string arch = arch_r.ok() ? arch_r.value() : "";
  auto u64_or = [&](const std::string& key, uint64_t dflt) {
    const auto v = f.get_u64(key);
    return v.ok() ? v.value() : dflt;
  };
  sh.n_layer = int(std::min<uint64_t>(u64_or(arch + ".block_count", uint64_t(max_layer + 1)), 1u << 20));
  const uint64_t n_head = u64_or(arch + ".attention.head_count", 0);
  uint64_t n_kv = n_head;
  if (auto kv = f.get_u64(arch + ".attention.head_count_kv"); kv.ok()) {
    n_kv = kv.value();
  } else if (auto arr = f.get_i64_array(arch + ".attention.head_count_kv"); arr.ok() && !arr.value().empty()) {
    n_kv = uint64_t(std::max<int64_t>(arr.value()[0], 0));
  }
  sh.n_gqa = n_kv > 0 ? int(std::min<uint64_t>(n_head / n_kv, 1u << 20)) : 0;
  return sh;
}

Result<TensorTypeRule> parse_tensor_type_rule(std::string_view spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    return make_error(Status::invalid_argument,
                      "--tensor-type '" + std::string(spec) + "' should be REGEX=TYPE, e.g. 'attn_v=q8_0'");
  TensorTypeRule r;
  r.pattern = std::string(spec.substr(0, eq));
  try {
    r.re = std::regex(r.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return make_error(Status::invalid_argument, "--tensor-type '" + std::string(spec) + "': bad regex (" + e.what() + ")");
  }
  auto t = parse_quant_type(spec.substr(eq + 1));
  if (!t.ok()) return make_error(Status::invalid_argument, "--tensor-type '" + std::string(spec) + "': " + t.error().message);
  r.type = t.value();
  return r;
}

TensorType fallback_type(TensorType t, uint64_t cols) {
  auto fits = [&](TensorType x) { return row_bytes(uint32_t(x), cols).has_value(); };
  if (fits(t)) return t;
  TensorType alt = TensorType::F16;
  switch (t) {
    case TensorType::Q4_K: alt = TensorType::Q5_0; break;
    case TensorType::Q5_K: alt = TensorType::Q5_1; break;
    case TensorType::Q2_K:
    case TensorType::Q3_K: alt = TensorType::Q4_0; break;
    case TensorType::IQ4_XS: alt = TensorType::IQ4_NL; break;
    case TensorType::Q6_K: alt = TensorType::Q8_0; break;
    default: break;
  }
  return fits(alt) ? alt : TensorType::F16;  // f16: one element per block, always fits
}

TypeChoice choose_tensor_type(std::string_view name, const std::vector<uint64_t>& dims, bool has_output,
                              const TypePlanOptions& opts) {
  TypeChoice c;
  if (dims.size() != 2) return c;
  c.quantized = true;
  TensorType t = opts.base;
  bool decided = false;
  if (auto it = opts.explicit_types.find(name); it != opts.explicit_types.end()) {
    t = it->second;
    decided = true;
  }
  if (!decided) {
    const std::string n(name);
    for (const TensorTypeRule& r : opts.rules) {
      if (std::regex_search(n, r.re)) {
        t = r.type;
        decided = true;
        break;
      }
    }
  }
  if (!decided && !opts.pure) {
    const bool is_head = name == "output.weight" || (!has_output && name == "token_embd.weight");
    const auto tr = type_traits(uint32_t(opts.base));
    const bool low_bit = tr && tr->block_elems > 1 && opts.base != TensorType::Q8_0 && opts.base != TensorType::Q6_K;
    if (is_head && low_bit) t = TensorType::Q6_K;
    else if (const auto m = mix_type(name, opts.mix, opts.shape)) t = *m;
  }
  c.wanted = t;
  c.type = fallback_type(t, dims[0]);
  return c;
}

uint32_t llama_file_type(const QuantPreset& p) {
  for (const MixName& m : kMixes)
    if (m.mix == p.mix && p.mix != QuantMix::none) return m.file_type;
  switch (p.base) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q4_1: return 3;
    case TensorType::Q8_0: return 7;
    case TensorType::Q5_0: return 8;
    case TensorType::Q5_1: return 9;
    case TensorType::Q2_K: return 10;
    case TensorType::Q3_K: return 11;  // Q3_K_S
    case TensorType::Q4_K: return 14;  // Q4_K_S
    case TensorType::Q5_K: return 16;  // Q5_K_S
    case TensorType::Q6_K: return 18;
    case TensorType::IQ4_NL: return 25;
    case TensorType::IQ4_XS: return 30;
    case TensorType::BF16: return 32;
    default: return 0;
  }
}

}  // namespace pllm
