// build_pruned (quantizer/prune.h): the pruned model's metadata and tensors.
#include <algorithm>
#include <cstring>

#include "base/checked.h"
#include "kernels/kernels.h"
#include "quant/types.h"
#include "quantizer/prune.h"
#include "quantizer/prune_vocab.h"
#include "quantizer/quantize_model.h"

namespace pllm {
namespace {

// Rows `keep` of a tensor whose rows are dims[0] long (every dimension past the first counts
// rows; a 1-D tensor is rows of one element): whole rows' bytes, never requantised.
Result<void> add_selected_rows(GgufWriter& out, const TensorInfo& t, const std::vector<int>& keep) {
  const bool vec = t.dims.size() == 1;
  const uint64_t row_len = vec ? 1 : t.dims[0];
  const auto rb = row_bytes(t.type, row_len);
  const auto n_rows = vec ? std::optional<uint64_t>(t.dims[0]) : std::optional<uint64_t>(t.dims[1]);
  if (!rb || t.dims.size() > 2 || (!vec && row_len % type_traits(t.type)->block_elems) != 0)
    return make_error(Status::bad_format, "tensor '" + t.name + "': cannot select rows of this shape");
  std::vector<uint8_t> bytes;
  bytes.reserve(size_t(*rb) * keep.size());
  for (int r : keep) {
    if (r < 0 || uint64_t(r) >= *n_rows) return make_error(Status::internal, "row index out of range");
    const uint8_t* src = t.data + size_t(r) * size_t(*rb);
    bytes.insert(bytes.end(), src, src + *rb);
  }
  std::vector<uint64_t> dims = vec ? std::vector<uint64_t>{keep.size()} : std::vector<uint64_t>{row_len, keep.size()};
  return out.add_tensor(t.name, t.type, std::move(dims), std::move(bytes));
}

// Columns `keep` of a 2-D tensor. Blocks are independent, so an output block whose columns
// are exactly one input block (always, for float types; whole heads of attn_output) is that
// block's bytes; every other block is dequantised, gathered and quantised again to the same
// type with `method`, `importance` ([cols] of the original columns) weighting the act search.
Result<void> add_selected_columns(GgufWriter& out, const TensorInfo& t, const std::vector<int>& keep,
                                  QuantMethod method, const std::vector<float>& importance) {
  if (t.dims.size() != 2) return make_error(Status::bad_format, "tensor '" + t.name + "' is not 2-D");
  const uint64_t cols = t.dims[0], rows = t.dims[1];
  const TypeTraits tr = *type_traits(t.type);
  const TensorType type = static_cast<TensorType>(t.type);
  const auto in_rb = row_bytes(t.type, cols);
  const auto out_rb = row_bytes(t.type, keep.size());
  if (!in_rb || !out_rb)
    return make_error(Status::internal, "tensor '" + t.name + "': " + std::to_string(keep.size()) +
                                            " columns are not whole " + tr.name + " blocks");
  const auto total = checked_mul(*out_rb, rows);
  if (!total) return make_error(Status::bad_format, "tensor '" + t.name + "' is too large");

  const size_t B = tr.block_elems, bb = tr.block_bytes, n_blocks = keep.size() / B;
  std::vector<int64_t> src_block(n_blocks, -1);  // the input block an output block copies, or -1
  bool requant = false;
  for (size_t b = 0; b < n_blocks; ++b) {
    const int first = keep[b * B];
    bool whole = first % int(B) == 0;
    for (size_t i = 1; whole && i < B; ++i) whole = keep[b * B + i] == first + int(i);
    if (whole) src_block[b] = first / int64_t(B);
    else requant = true;
  }
  if (requant && !is_output_type(type))
    return make_error(Status::unsupported, "tensor '" + t.name + "': cannot re-quantise type " + tr.name);

  std::vector<uint8_t> bytes(static_cast<size_t>(*total));
  std::vector<float> row(requant ? static_cast<size_t>(cols) : 0), kept(requant ? keep.size() : 0), kept_w;
  const bool weighted = requant && method == QuantMethod::act && !importance.empty();
  if (weighted)
    for (int j : keep) kept_w.push_back(importance[size_t(j)]);
  const auto dequant = kernels().for_type(type).dequantize_row;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* src = t.data + size_t(r) * size_t(*in_rb);
    uint8_t* dst = bytes.data() + size_t(r) * size_t(*out_rb);
    if (requant) {
      dequant(src, row.data(), int64_t(cols));
      for (size_t i = 0; i < keep.size(); ++i) kept[i] = row[size_t(keep[i])];
    }
    for (size_t b = 0; b < n_blocks; ++b) {
      if (src_block[b] >= 0)
        std::memcpy(dst + b * bb, src + size_t(src_block[b]) * bb, bb);
      else
        quantize_row_to(type, kept.data() + b * B, weighted ? kept_w.data() + b * B : nullptr,
                        method != QuantMethod::rtn, dst + b * bb, int64_t(B));
    }
  }
  return out.add_tensor(t.name, t.type, {uint64_t(keep.size()), rows}, std::move(bytes));
}

// The kept columns after compensation (values: [rows][n_keep]), every block quantised again to
// the tensor's type with `method`, `importance` ([cols] of the original columns) weighting the
// act search through `keep`.
Result<void> add_fitted_columns(GgufWriter& out, const TensorInfo& t, const std::vector<int>& keep,
                                const std::vector<float>& values, QuantMethod method,
                                const std::vector<float>& importance) {
  const uint64_t rows = t.dims[1];
  const TensorType type = static_cast<TensorType>(t.type);
  const auto rb = row_bytes(t.type, keep.size());
  if (t.dims.size() != 2 || !rb || values.size() != keep.size() * rows)
    return make_error(Status::internal, "tensor '" + t.name + "': fitted columns of the wrong shape");
  if (!is_output_type(type))
    return make_error(Status::unsupported, "tensor '" + t.name + "': cannot quantise type " +
                                               type_traits(t.type)->name + " again");
  const auto total = checked_mul(*rb, rows);
  if (!total) return make_error(Status::bad_format, "tensor '" + t.name + "' is too large");
  std::vector<float> w;
  if (method == QuantMethod::act && !importance.empty())
    for (int j : keep) w.push_back(importance[size_t(j)]);
  std::vector<uint8_t> bytes(static_cast<size_t>(*total));
  for (uint64_t r = 0; r < rows; ++r)
    quantize_row_to(type, values.data() + r * keep.size(), w.empty() ? nullptr : w.data(), method != QuantMethod::rtn,
                    bytes.data() + r * size_t(*rb), int64_t(keep.size()));
  return out.add_tensor(t.name, t.type, {uint64_t(keep.size()), rows}, std::move(bytes));
}

Result<void> add_f32_vector(GgufWriter& out, const std::string& name, const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return out.add_tensor(name, uint32_t(TensorType::F32), {uint64_t(v.size())}, std::move(bytes));
}

Result<void> add_copy(GgufWriter& out, const TensorInfo& t) {
  return out.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
}

// A whole 2-D tensor dequantised and quantised again to `type` (the output head).
Result<void> add_requantized(GgufWriter& out, const TensorInfo& t, TensorType type, QuantMethod method,
                             const std::vector<float>& importance, int n_threads) {
  if (t.type == uint32_t(type)) return add_copy(out, t);  // already that type: keep the bytes
  PLLM_ASSIGN(std::vector<float> x, dequantize_tensor(t));
  ThreadPool pool(n_threads > 0 ? n_threads : default_thread_count());
  std::vector<uint8_t> q = quantize_matrix(x.data(), int64_t(t.dims[1]), int64_t(t.dims[0]), type, method,
                                           importance.empty() ? nullptr : importance.data(), pool);
  return out.add_tensor(t.name, uint32_t(type), t.dims, std::move(q));
}

// The act search's weights for `weight`'s columns (empty without statistics for it).
std::vector<float> importance_of(const PruneOptions& opts, const std::string& weight) {
  if (opts.requant != QuantMethod::act || !opts.stats) return {};
  const ChannelStats* s = opts.stats->find(weight);
  return s ? column_importance(*s) : std::vector<float>{};
}

// Element indices [g·width, (g + 1)·width) of every kept group g.
std::vector<int> expand(const std::vector<int>& groups, int width) {
  std::vector<int> idx;
  idx.reserve(groups.size() * size_t(width));
  for (int g : groups)
    for (int i = 0; i < width; ++i) idx.push_back(g * width + i);
  return idx;
}

// "blk.<l>.<rest>" -> l and rest; -1 for tensors outside the layers.
int parse_layer(const std::string& name, std::string* rest) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 4) return -1;
  int l = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    l = l * 10 + (name[i] - '0');
  }
  *rest = name.substr(dot + 1);
  return l;
}

std::string layer_name(int l, const char* what) { return "blk." + std::to_string(l) + "." + what; }

// Per-layer tensors whose shape does not depend on n_ff or the head counts.
bool shape_independent(const std::string& rest) {
  static const char* const kNames[] = {"attn_norm.weight",           "ffn_norm.weight",
                                       "attn_q_norm.weight",         "attn_k_norm.weight",
                                       "post_attention_norm.weight", "post_ffw_norm.weight"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return rest == n; });
}

}  // namespace

bool plan_ffn_uniform(const PrunePlan& plan) {
  return std::all_of(plan.layers.begin(), plan.layers.end(),
                     [&](const LayerPrunePlan& P) { return P.keep_ff.size() == plan.layers.front().keep_ff.size(); });
}

std::string pruned_architecture(const ModelConfig& c, const PrunePlan& plan) {
  return c.arch == "llama" && !plan_ffn_uniform(plan) ? "deci" : c.arch;
}

Result<void> build_pruned(const Model& model, const PruneOptions& opts, const PrunePlan& plan,
                          const std::string& source_name, GgufWriter& out) {
  const GgufFile& f = model.file();
  const ModelConfig& c = model.config();
  if (plan.layers.size() != size_t(c.n_layer)) return make_error(Status::internal, "prune plan of another model");
  out.copy_metadata(f);
  const std::string arch = pruned_architecture(c, plan);
  if (arch != c.arch) {  // llama -> deci: every "llama." key moves to "deci."
    const std::string from = c.arch + ".";
    for (const auto& [key, value] : f.metadata()) {
      if (key.rfind(from, 0) != 0) continue;
      out.remove(key);
      out.set_value(arch + "." + key.substr(from.size()), value);
    }
    out.set_string("general.architecture", arch);
  }
  const std::string p = arch + ".";

  std::vector<int32_t> ff_before, ff_after;
  for (const LayerPrunePlan& P : plan.layers) {
    ff_before.push_back(P.n_ff);
    ff_after.push_back(int32_t(P.keep_ff.size()));
  }
  if (plan_ffn_uniform(plan))
    out.set_u32(p + "feed_forward_length", uint32_t(ff_after.front()));
  else
    out.set_array_i32(p + "feed_forward_length", ff_after);  // llama.cpp's per-layer form

  const int kv_after = int(plan.layers.front().keep_kv.size());
  const bool heads_pruned = kv_after != c.n_head_kv;
  if (heads_pruned) {
    out.set_u32(p + "attention.head_count", uint32_t(kv_after * plan.group));
    out.set_u32(p + "attention.head_count_kv", uint32_t(kv_after));
    out.set_u32(p + "attention.key_length", uint32_t(c.head_dim));
    out.set_u32(p + "attention.value_length", uint32_t(c.head_dim));
  }

  out.set_u32("pocketllm.prune.version", kPruneVersion);
  out.set_f32("pocketllm.prune.ffn_ratio", float(opts.ffn_ratio));
  out.set_f32("pocketllm.prune.head_ratio", float(opts.head_ratio));
  out.set_string("pocketllm.prune.importance", plan.from_activations ? "activations" : "weights");
  out.set_string("pocketllm.prune.requant", quant_method_name(opts.requant));
  out.set_string("pocketllm.prune.compensate", compensate_name(opts.compensate));
  if (opts.compensate != Compensate::none) {
    out.set_f32("pocketllm.prune.ridge", float(opts.ridge));
    out.set_f32("pocketllm.prune.shrink", float(opts.shrink));
  } else {
    out.remove("pocketllm.prune.ridge");
    out.remove("pocketllm.prune.shrink");
  }
  out.set_string("pocketllm.prune.source", source_name);
  if (opts.output_type)
    out.set_string("pocketllm.prune.output_type", quant_type_name(*opts.output_type));
  else
    out.remove("pocketllm.prune.output_type");
  out.set_u64("pocketllm.prune.source_identity", model.identity());
  out.set_array_i32("pocketllm.prune.n_ff_before", ff_before);
  out.set_u32("pocketllm.prune.head_count_kv_before", uint32_t(c.n_head_kv));
  if (opts.stats) {
    out.set_string("pocketllm.prune.stats_source", opts.stats->source);
    out.set_u64("pocketllm.prune.stats_tokens", opts.stats->n_tokens);
  } else {
    out.remove("pocketllm.prune.stats_source");
    out.remove("pocketllm.prune.stats_tokens");
  }

  if (opts.vocab) PLLM_TRY(write_vocab_metadata(out, f, *opts.vocab, p));

  const std::string head = output_head_name(f);
  for (const TensorInfo& t : f.tensors()) {
    std::string rest;
    const int l = parse_layer(t.name, &rest);
    if (opts.vocab) {  // the kept tokens' rows of token_embd / output (head re-quantised with --output-type)
      const bool is_head = t.name == head;
      PLLM_ASSIGN(const bool done, add_vocab_tensor(out, t, *opts.vocab, is_head ? opts.output_type : std::nullopt,
                                                    opts.requant, is_head ? importance_of(opts, t.name)
                                                                          : std::vector<float>{}, opts.n_threads));
      if (done) continue;
    }
    if (opts.output_type && t.name == head) {
      PLLM_TRY(add_requantized(out, t, *opts.output_type, opts.requant, importance_of(opts, t.name), opts.n_threads));
      continue;
    }
    if (l < 0 || shape_independent(rest)) {
      PLLM_TRY(add_copy(out, t));
      continue;
    }
    if (l >= c.n_layer) return make_error(Status::bad_format, "tensor '" + t.name + "' is past the last layer");
    const LayerPrunePlan& P = plan.layers[size_t(l)];
    const bool ffn_pruned = P.keep_ff.size() != size_t(P.n_ff), kv_pruned = P.keep_kv.size() != size_t(P.n_kv);
    if (!ffn_pruned && !kv_pruned) {  // an unchanged layer is copied as it is (no requantisation)
      PLLM_TRY(add_copy(out, t));
      continue;
    }
    if (rest == "ffn_down.bias" || rest == "attn_output.bias") {  // [n_embd]: replaced when the fit moved it
      if (rest == "ffn_down.bias" ? P.down_bias.empty() : P.wo_bias.empty()) PLLM_TRY(add_copy(out, t));
      continue;
    }
    const std::vector<int> q_rows = expand(P.keep_kv, plan.group * c.head_dim);
    const std::vector<int> kv_rows = expand(P.keep_kv, c.head_dim);
    const bool is_ffn = rest.rfind("ffn_", 0) == 0, is_attn = rest.rfind("attn_", 0) == 0;
    if ((is_ffn && !ffn_pruned) || (is_attn && !kv_pruned)) {
      PLLM_TRY(add_copy(out, t));
    } else if (rest == "ffn_gate.weight" || rest == "ffn_up.weight") {
      PLLM_TRY(add_selected_rows(out, t, P.keep_ff));
    } else if (rest == "ffn_down.weight" && !P.down_w.empty()) {
      PLLM_TRY(add_fitted_columns(out, t, P.keep_ff, P.down_w, opts.requant, importance_of(opts, t.name)));
      if (!P.down_bias.empty()) PLLM_TRY(add_f32_vector(out, layer_name(l, "ffn_down.bias"), P.down_bias));
    } else if (rest == "ffn_down.weight") {
      PLLM_TRY(add_selected_columns(out, t, P.keep_ff, opts.requant, importance_of(opts, t.name)));
    } else if (rest == "attn_q.weight") {
      PLLM_TRY(add_selected_rows(out, t, q_rows));
    } else if (rest == "attn_k.weight" || rest == "attn_v.weight") {
      PLLM_TRY(add_selected_rows(out, t, kv_rows));
    } else if (rest == "attn_output.weight" && !P.wo_w.empty()) {
      PLLM_TRY(add_fitted_columns(out, t, q_rows, P.wo_w, opts.requant, importance_of(opts, t.name)));
      if (!P.wo_bias.empty()) PLLM_TRY(add_f32_vector(out, layer_name(l, "attn_output.bias"), P.wo_bias));
    } else if (rest == "attn_output.weight") {
      PLLM_TRY(add_selected_columns(out, t, q_rows, opts.requant, importance_of(opts, t.name)));
    } else {
      return make_error(Status::unsupported, "tensor '" + t.name + "': the pruner does not know how its shape "
                                             "depends on the layer's sizes");
    }
  }
  return {};
}

}  // namespace pllm
