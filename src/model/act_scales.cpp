#include "model/act_scales.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/kernels.h"
#include "model/model.h"

namespace pllm {
namespace {

// The products of a model, grouped by shared input.
std::vector<std::vector<Matrix*>> product_groups(ModelWeights& w) {
  std::vector<std::vector<Matrix*>> g;
  for (LayerWeights& L : w.layers) {
    g.push_back({&L.wq, &L.wk, &L.wv});
    g.push_back({&L.wo});
    g.push_back({&L.w_gate, &L.w_up});
    g.push_back({&L.w_down});
    g.push_back({&L.conv_b, &L.conv_c, &L.conv_x});
    g.push_back({&L.conv_out});
  }
  g.push_back({&w.output});
  return g;
}

std::string short_float(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

Result<ActScaleCounts> apply_act_scales(const GgufFile& f, ModelWeights& w) {
  std::vector<std::vector<Matrix*>> groups = product_groups(w);
  std::vector<float> group_scale(groups.size(), 0.0f);
  const auto& kv = f.metadata();
  for (auto it = kv.lower_bound(kActScalePrefix); it != kv.end() && it->first.starts_with(kActScalePrefix); ++it) {
    const std::string& key = it->first;
    const std::string_view tensor = std::string_view(key).substr(kActScalePrefix.size());
    if (it->second.type != GgufType::f32)
      return make_error(Status::bad_format, f.path() + ": metadata " + key + " has type " +
                                                gguf_type_name(it->second.type) + ", expected f32");
    const double d = std::get<double>(it->second.scalar);
    if (!std::isfinite(d) || d < double(kMinActScale) || d > double(kMaxActScale))
      return make_error(Status::bad_format, f.path() + ": metadata " + key + " = " + short_float(d) +
                                                " is not a valid activation scale (a finite value in [" +
                                                short_float(kMinActScale) + ", " + short_float(kMaxActScale) + "])");
    bool found = false;
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (const Matrix* m : groups[gi])
        if (!m->name.empty() && m->name == tensor) {  // a layer without conv weights has unnamed ones
          found = true;
          group_scale[gi] = std::max(group_scale[gi], float(d));
        }
    if (!found)
      return make_error(Status::bad_format, f.path() + ": metadata " + key + " names '" + std::string(tensor) +
                                                "', which is not the weight of a matrix product of this model");
  }
  ActScaleCounts counts;
  const KernelTable& kt = kernels();
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (Matrix* m : groups[gi]) {
      m->act_scale = group_scale[gi];
      if (kt.for_type(m->type).act_type == TensorType::F32) continue;
      ++(group_scale[gi] > 0.0f ? counts.n_static : counts.n_dynamic);
    }
  return counts;
}

}  // namespace pllm
