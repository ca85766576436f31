#include "quantizer/act_scale_calib.h"

#include <vector>

#include "gguf/gguf_writer.h"
#include "model/act_scales.h"
#include "model/weights.h"

namespace pllm {

void ActHistograms::observe(const Matrix& W, const float* X, int n_tok) {
  auto it = hist_.find(W.name);
  if (it == hist_.end()) it = hist_.emplace(std::string(W.name), AbsHistogram(n_bins_)).first;
  it->second.add(X, int64_t(n_tok) * W.cols);
}

Result<std::vector<ActScaleEntry>> compute_act_scales(const ActHistograms& h, const ActScaleOptions& opts) {
  if (opts.method == ActCalibMethod::percentile && !(opts.percentile > 0.0 && opts.percentile <= 1.0))
    return make_error(Status::invalid_argument, "percentile must be in (0, 1]");
  std::vector<ActScaleEntry> out;
  for (const auto& [name, hist] : h.histograms()) {
    auto t = act_threshold(hist, opts.method, opts.percentile);
    if (!t.ok()) return make_error(t.error().code, name + ": " + t.error().message);
    out.push_back({name, hist.max_abs(), t.value(), act_scale_for_threshold(t.value())});
  }
  return out;
}

Result<void> write_with_act_scales(const GgufFile& in, const std::string& out_path,
                                   std::span<const ActScaleEntry> scales, const ActCalibProvenance& prov) {
  GgufWriter w;
  w.copy_metadata(in);
  std::vector<std::string> old;
  for (const auto& [key, value] : in.metadata())
    if (key.starts_with(kActScalePrefix)) old.push_back(key);
  for (const std::string& key : old) w.remove(key);
  for (const ActScaleEntry& e : scales) w.set_f32(act_scale_key(e.tensor), e.scale);
  w.set_string(kActCalibMethodKey, prov.method);
  w.set_u64(kActCalibTokensKey, prov.tokens);
  w.set_string(kActCalibSourceKey, prov.source);
  for (const TensorInfo& t : in.tensors())
    PLLM_TRY(w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes)));
  return w.write(out_path);
}

}  // namespace pllm
