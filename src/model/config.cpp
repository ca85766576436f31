#include "model/config.h"

#include <algorithm>

#include "kernels/kv_format.h"

namespace pllm {
namespace {

Result<int> get_dim(const GgufFile& f, const std::string& key, uint64_t max) {
  PLLM_ASSIGN(uint64_t v, f.get_u64(key));
  if (v == 0 || v > max)
    return make_error(Status::bad_format,
                      f.path() + ": metadata '" + key + "' = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

// A key that is either one value for every layer or an array of n_layer values, as
// llama.cpp's get_key_or_arr reads {arch}.feed_forward_length and the head counts.
Result<std::vector<int>> get_dim_per_layer(const GgufFile& f, const std::string& key, int n_layer, uint64_t max) {
  const GgufValue* v = f.find(key);
  if (!v) return make_error(Status::bad_format, f.path() + ": missing metadata '" + key + "'");
  if (v->type != GgufType::array) {
    PLLM_ASSIGN(int d, get_dim(f, key, max));
    return std::vector<int>(size_t(n_layer), d);
  }
  PLLM_ASSIGN(std::vector<int64_t> a, f.get_i64_array(key));
  if (a.size() != size_t(n_layer))
    return make_error(Status::bad_format, f.path() + ": metadata '" + key + "' has " + std::to_string(a.size()) +
                                              " values, expected one per layer (" + std::to_string(n_layer) + ")");
  std::vector<int> out(a.size());
  for (size_t l = 0; l < a.size(); ++l) {
    if (a[l] <= 0 || uint64_t(a[l]) > max)
      return make_error(Status::bad_format, f.path() + ": metadata '" + key + "'[" + std::to_string(l) +
                                                "] = " + std::to_string(a[l]) + " is out of range");
    out[l] = int(a[l]);
  }
  return out;
}

// head_count_kv as an array: one count for every attention layer, 0 for a layer without
// attention where the arch has such layers (lfm2's convolutions).
Result<void> read_kv_heads_per_layer(const GgufFile& f, const std::string& key, bool recurrent_layers,
                                     ModelConfig& c) {
  PLLM_ASSIGN(std::vector<int64_t> a, f.get_i64_array(key));
  if (a.size() != size_t(c.n_layer))
    return make_error(Status::bad_format, f.path() + ": metadata '" + key + "' has " + std::to_string(a.size()) +
                                              " values, expected one per layer (" + std::to_string(c.n_layer) + ")");
  c.n_head_kv = 0;
  c.recurrent_layer.assign(a.size(), 0);
  for (size_t l = 0; l < a.size(); ++l) {
    const std::string at = f.path() + ": metadata '" + key + "'[" + std::to_string(l) + "] = " + std::to_string(a[l]);
    if (a[l] < 0 || a[l] > 1024) return make_error(Status::bad_format, at + " is out of range");
    if (a[l] == 0) {
      if (!recurrent_layers)
        return make_error(Status::unsupported, at + ": layers without attention are not supported for " + c.arch);
      c.recurrent_layer[l] = 1;
    } else if (c.n_head_kv != 0 && a[l] != c.n_head_kv) {
      return make_error(Status::unsupported, at + ": different KV head counts per layer are not supported");
    } else {
      c.n_head_kv = int(a[l]);
    }
  }
  if (c.n_head_kv == 0) return make_error(Status::unsupported, f.path() + ": a model without attention layers");
  if (std::find(c.recurrent_layer.begin(), c.recurrent_layer.end(), 1) == c.recurrent_layer.end())
    c.recurrent_layer.clear();
  return {};
}

}  // namespace

Result<std::vector<uint8_t>> read_layer_flags(const GgufFile& f, const std::string& key, int n_layer) {
  const GgufValue* v = f.find(key);
  if (!v || v->type != GgufType::array || v->items.size() < size_t(n_layer))
    return make_error(Status::bad_format, f.path() + ": " + key + " must be an array of one value per layer");
  std::vector<uint8_t> out(size_t(n_layer), 0);
  for (int l = 0; l < n_layer; ++l) {
    const auto& s = v->items[size_t(l)].scalar;
    if (const bool* b = std::get_if<bool>(&s)) out[size_t(l)] = *b;
    else if (const uint64_t* u = std::get_if<uint64_t>(&s)) out[size_t(l)] = *u != 0;
    else if (const int64_t* i = std::get_if<int64_t>(&s)) out[size_t(l)] = *i != 0;
    else return make_error(Status::bad_format, f.path() + ": " + key + " must hold booleans or integers");
  }
  return out;
}

Result<void> check_head_dim(const GgufFile& f, int head_dim) {
  if (head_dim % 16 != 0 || head_dim > kMaxHeadDim)
    return make_error(Status::unsupported, f.path() + ": head size " + std::to_string(head_dim) +
                                               " is not supported (a multiple of 16, at most " +
                                               std::to_string(kMaxHeadDim) + ")");
  return {};
}

bool ModelConfig::n_ff_uniform() const {
  return std::all_of(n_ff_layer.begin(), n_ff_layer.end(), [&](int v) { return v == n_ff_layer.front(); });
}

Result<ModelConfig> read_transformer_config(const GgufFile& f, const std::string& arch, bool recurrent_layers) {
  ModelConfig c;
  c.arch = arch;
  const std::string p = arch + ".";
  PLLM_ASSIGN(c.n_layer, get_dim(f, p + "block_count", 1024));
  PLLM_ASSIGN(c.n_embd, get_dim(f, p + "embedding_length", 1 << 16));
  PLLM_ASSIGN(c.n_ff_layer, get_dim_per_layer(f, p + "feed_forward_length", c.n_layer, 1 << 18));
  c.n_ff = *std::max_element(c.n_ff_layer.begin(), c.n_ff_layer.end());
  PLLM_ASSIGN(c.n_head, get_dim(f, p + "attention.head_count", 1024));
  c.n_head_kv = c.n_head;
  if (const GgufValue* v = f.find(p + "attention.head_count_kv"); v && v->type == GgufType::array) {
    PLLM_TRY(read_kv_heads_per_layer(f, p + "attention.head_count_kv", recurrent_layers, c));
  } else if (v) {
    PLLM_ASSIGN(c.n_head_kv, get_dim(f, p + "attention.head_count_kv", 1024));
  }
  if (c.n_head % c.n_head_kv != 0)
    return make_error(Status::bad_format, f.path() + ": head_count " + std::to_string(c.n_head) +
                                              " is not a multiple of head_count_kv " +
                                              std::to_string(c.n_head_kv));
  c.head_dim = c.n_embd / c.n_head;
  if (f.find(p + "attention.key_length")) {
    PLLM_ASSIGN(c.head_dim, get_dim(f, p + "attention.key_length", 1024));
  }
  // llama.cpp's value head defaults to n_embd / n_head, not to key_length.
  int vl = c.n_embd / c.n_head;
  if (f.find(p + "attention.value_length")) {
    PLLM_ASSIGN(vl, get_dim(f, p + "attention.value_length", 1024));
  }
  if (vl != c.head_dim)
    return make_error(Status::unsupported, f.path() + ": value_length " + std::to_string(vl) + " != key_length " +
                                               std::to_string(c.head_dim) + " is not supported");
  PLLM_TRY(check_head_dim(f, c.head_dim));
  c.n_rot = c.head_dim;
  if (f.find(p + "rope.dimension_count")) {
    PLLM_ASSIGN(c.n_rot, get_dim(f, p + "rope.dimension_count", 4096));
  }
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    return make_error(Status::bad_format, f.path() + ": rope.dimension_count " + std::to_string(c.n_rot) +
                                              " must be even and at most the head size");
  PLLM_ASSIGN(uint64_t ctx, f.get_u64_or(p + "context_length", 2048));
  c.n_ctx_train = static_cast<int>(ctx > (1u << 24) ? (1u << 24) : (ctx == 0 ? 2048 : ctx));
  PLLM_ASSIGN(double base, f.get_f64_or(p + "rope.freq_base", 10000.0));
  PLLM_ASSIGN(double eps, f.get_f64_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(base > 0.0) || !(eps > 0.0 && eps < 1.0))
    return make_error(Status::bad_format, f.path() + ": rope.freq_base or layer_norm_rms_epsilon out of range");
  c.rope_base = static_cast<float>(base);
  c.rms_eps = static_cast<float>(eps);

  PLLM_ASSIGN(std::string scaling, f.get_string_or(p + "rope.scaling.type", "none"));
  if (scaling == "linear") {
    PLLM_ASSIGN(double factor, f.get_f64(p + "rope.scaling.factor"));
    if (!(factor >= 1.0))
      return make_error(Status::bad_format, f.path() + ": rope.scaling.factor must be >= 1");
    c.rope_linear_scale = static_cast<float>(factor);
  } else if (scaling == "longrope") {
    // The factors are tensors (rope_factors_long / _short): an architecture that reads them
    // loads them (load_longrope); the others reject the file (load_rope_factors).
    c.longrope = true;
  } else if (scaling != "none" && !scaling.empty()) {
    return make_error(Status::unsupported,
                      f.path() + ": rope scaling type '" + scaling + "' is not supported");
  }
  return c;
}

Result<float> read_positive_or(const GgufFile& f, const ModelConfig& c, const std::string& key, double dflt) {
  PLLM_ASSIGN(double v, f.get_f64_or(c.arch + "." + key, dflt));
  if (!(v > 0.0)) return make_error(Status::bad_format, f.path() + ": " + key + " out of range");
  return static_cast<float>(v);
}

Result<void> read_sliding_window(const GgufFile& f, ModelConfig& c, int default_pattern, int default_window,
                                 double default_local_base, bool per_layer_pattern) {
  const std::string p = c.arch + ".";
  uint64_t window = uint64_t(default_window);
  if (default_window == 0 || f.find(p + "attention.sliding_window")) {
    PLLM_ASSIGN(window, f.get_u64(p + "attention.sliding_window"));
  }
  if (window == 0 || window > (1u << 24))
    return make_error(Status::bad_format, f.path() + ": attention.sliding_window out of range");
  c.sliding_window = static_cast<int>(window);
  c.swa_pattern = default_pattern;
  if (const GgufValue* v = f.find(p + "attention.sliding_window_pattern")) {
    if (v->type == GgufType::array) {
      if (!per_layer_pattern)
        return make_error(Status::unsupported, f.path() + ": a per-layer sliding_window_pattern is not supported");
      PLLM_ASSIGN(c.local_layer, read_layer_flags(f, p + "attention.sliding_window_pattern", c.n_layer));
      c.swa_pattern = 0;
      PLLM_ASSIGN(c.rope_base_local, read_positive_or(f, c, "rope.freq_base_swa", default_local_base));
      return {};
    }
    PLLM_ASSIGN(uint64_t pat, f.get_u64(p + "attention.sliding_window_pattern"));
    if (pat == 0 || pat > 1024)
      return make_error(Status::bad_format, f.path() + ": attention.sliding_window_pattern out of range");
    c.swa_pattern = static_cast<int>(pat);
  }
  PLLM_ASSIGN(c.rope_base_local, read_positive_or(f, c, "rope.freq_base_swa", default_local_base));
  return {};
}

}  // namespace pllm
