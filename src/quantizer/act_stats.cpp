// Activation statistics: accumulation (double), GGUF save/load, model check.
#include "quantizer/act_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gguf/gguf_writer.h"
#include "model/weights.h"
#include "quant/types.h"

namespace pllm {
namespace {

constexpr const char* kType = "pocketllm.act_stats";
constexpr const char* kStatNames[] = {"sum_sq", "sum_abs", "max_abs"};

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::vector<uint8_t> f32_bytes(const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = float(v[i]);
    std::memcpy(out.data() + i * sizeof(float), &f, sizeof f);
  }
  return out;
}

}  // namespace

std::vector<float> ChannelStats::mean_sq() const {
  std::vector<float> m(cols(), 0.0f);
  if (count == 0) return m;
  for (size_t c = 0; c < m.size(); ++c) m[c] = float(sum_sq[c] / double(count));
  return m;
}

void ActStats::observe(const Matrix& W, const float* X, int n_tok) {
  auto it = stats_.find(W.name);
  if (it == stats_.end()) {
    ChannelStats s;
    s.sum_sq.assign(size_t(W.cols), 0.0);
    s.sum_abs.assign(size_t(W.cols), 0.0);
    s.max_abs.assign(size_t(W.cols), 0.0);
    it = stats_.emplace(std::string(W.name), std::move(s)).first;
  }
  ChannelStats& s = it->second;
  const size_t cols = s.cols();
  if (cols != size_t(W.cols)) return;  // cannot happen for one model: a name has one shape
  for (int t = 0; t < n_tok; ++t) {
    const float* x = X + size_t(t) * cols;
    for (size_t c = 0; c < cols; ++c) {
      const double v = x[c], a = std::fabs(v);
      s.sum_sq[c] += v * v;
      s.sum_abs[c] += a;
      s.max_abs[c] = std::max(s.max_abs[c], a);
    }
  }
  s.count += uint64_t(n_tok);
}

const ChannelStats* ActStats::find(std::string_view weight) const {
  auto it = stats_.find(weight);
  return it == stats_.end() ? nullptr : &it->second;
}

Result<void> ActStats::save(const std::string& path) const {
  GgufWriter w;
  w.set_string("general.type", kType);
  w.set_u32("pocketllm.act_stats.version", kActStatsVersion);
  w.set_u64("pocketllm.act_stats.model_identity", model_identity);
  w.set_string("pocketllm.act_stats.model_name", model_name);
  w.set_u64("pocketllm.act_stats.tokens", n_tokens);
  w.set_string("pocketllm.act_stats.source", source);
  for (const auto& [name, s] : stats_) {
    if (s.count > (uint64_t(1) << 24))
      return make_error(Status::out_of_range, "activation statistics of '" + name + "' cover " +
                                                  std::to_string(s.count) + " rows, more than an F32 count holds exactly");
    const std::vector<double>* v[] = {&s.sum_sq, &s.sum_abs, &s.max_abs};
    for (int k = 0; k < 3; ++k)
      PLLM_TRY(w.add_tensor(name + "." + kStatNames[k], uint32_t(TensorType::F32), {s.cols()}, f32_bytes(*v[k])));
    PLLM_TRY(w.add_tensor(name + ".count", uint32_t(TensorType::F32), {1}, f32_bytes({double(s.count)})));
  }
  return w.write(path);
}

Result<ActStats> ActStats::load(const std::string& path) {
  PLLM_ASSIGN(auto f, GgufFile::open(path));
  auto bad = [&](const std::string& why) { return make_error(Status::bad_format, path + ": " + why); };
  PLLM_ASSIGN(std::string type, f->get_string_or("general.type", ""));
  if (type != kType) return bad("not an activation statistics file (general.type is '" + type + "')");
  PLLM_ASSIGN(uint64_t version, f->get_u64("pocketllm.act_stats.version"));
  if (version != kActStatsVersion)
    return bad("activation statistics version " + std::to_string(version) + ", this build reads " +
               std::to_string(kActStatsVersion));
  ActStats st;
  PLLM_ASSIGN(st.model_identity, f->get_u64("pocketllm.act_stats.model_identity"));
  PLLM_ASSIGN(st.model_name, f->get_string_or("pocketllm.act_stats.model_name", ""));
  PLLM_ASSIGN(st.n_tokens, f->get_u64("pocketllm.act_stats.tokens"));
  PLLM_ASSIGN(st.source, f->get_string_or("pocketllm.act_stats.source", ""));

  // Group the tensors by weight name: every weight needs all four statistics.
  std::map<std::string, std::map<std::string, const TensorInfo*>, std::less<>> by_weight;
  for (const TensorInfo& t : f->tensors()) {
    const size_t dot = t.name.rfind('.');
    if (dot == std::string::npos || dot == 0) return bad("unexpected tensor '" + t.name + "'");
    const std::string stat = t.name.substr(dot + 1);
    if (stat != "sum_sq" && stat != "sum_abs" && stat != "max_abs" && stat != "count")
      return bad("unexpected tensor '" + t.name + "'");
    if (t.type != uint32_t(TensorType::F32) || t.dims.size() != 1)
      return bad("tensor '" + t.name + "' must be a 1-D F32 tensor");
    by_weight[t.name.substr(0, dot)][stat] = &t;
  }
  auto read_f32 = [](const TensorInfo& t, size_t i) {
    float v;
    std::memcpy(&v, t.data + i * sizeof(float), sizeof v);
    return v;
  };
  for (const auto& [name, stats] : by_weight) {
    if (stats.size() != 4) return bad("weight '" + name + "' lacks some of sum_sq, sum_abs, max_abs, count");
    const TensorInfo& cnt = *stats.at("count");
    if (cnt.dims[0] != 1) return bad("tensor '" + name + ".count' must hold one value");
    const float c = read_f32(cnt, 0);
    if (!(c >= 1.0f) || c > float(1 << 24) || c != std::floor(c))
      return bad("tensor '" + name + ".count' is not a positive whole number");
    ChannelStats s;
    s.count = uint64_t(c);
    const uint64_t cols = stats.at("sum_sq")->dims[0];
    std::vector<double>* dst[] = {&s.sum_sq, &s.sum_abs, &s.max_abs};
    for (int k = 0; k < 3; ++k) {
      const TensorInfo& t = *stats.at(kStatNames[k]);
      if (t.dims[0] != cols) return bad("the statistics of weight '" + name + "' differ in length");
      dst[k]->resize(size_t(cols));
      for (size_t i = 0; i < cols; ++i) {
        const float v = read_f32(t, i);
        if (!std::isfinite(v) || v < 0.0f) return bad("tensor '" + t.name + "' holds a negative or non-finite value");
        (*dst[k])[i] = v;
      }
    }
    st.stats_.emplace(name, std::move(s));
  }
  if (st.stats_.empty()) return bad("holds no statistics");
  return st;
}

Result<void> ActStats::check_matches(const GgufFile& model, uint64_t identity) const {
  if (identity != model_identity) {
    const std::string from = model_name.empty() ? "" : " '" + model_name + "'";
    return make_error(Status::invalid_argument,
                      "activation statistics were collected on another model" + from + " (identity " +
                          hex(model_identity) + "), not on " + model.path() + " (identity " + hex(identity) +
                          "); collect them with --calib on this file");
  }
  for (const auto& [name, s] : stats_) {
    const TensorInfo* t = model.tensor(name);
    if (!t || t->dims.size() != 2 || t->dims[0] != s.cols())
      return make_error(Status::invalid_argument, "activation statistics for '" + name + "' (" +
                                                      std::to_string(s.cols()) + " columns) do not match " +
                                                      model.path());
  }
  return {};
}

}  // namespace pllm
