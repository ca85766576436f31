// Per-input-channel statistics of the activations feeding each 2-D weight, gathered by
// observing a model's products during calibration (quantizer/calibration.h). The
// activation-aware quantiser weights each column's error by its mean x².
//
// File format (GGUF, written with GgufWriter): per weight W with `cols` input channels,
// F32 tensors "W.sum_sq", "W.sum_abs", "W.max_abs" of [cols] and "W.count" of [1] (rows
// seen; exact up to 2^24, as llama.cpp's imatrix GGUF stores its counts), plus metadata
//   general.type                         "pocketllm.act_stats"
//   pocketllm.act_stats.version          u32 (kActStatsVersion)
//   pocketllm.act_stats.model_identity   u64, Model::identity() of the model observed
//   pocketllm.act_stats.model_name       string (general.name, for messages)
//   pocketllm.act_stats.tokens           u64, tokens run through the model
//   pocketllm.act_stats.source           string, the calibration text's name
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/act_observer.h"

namespace pllm {

inline constexpr uint32_t kActStatsVersion = 1;

struct ChannelStats {
  std::vector<double> sum_sq, sum_abs, max_abs;  // [cols]
  uint64_t count = 0;                            // activation rows (tokens) seen
  size_t cols() const { return sum_sq.size(); }
  // Mean x² per column (the activation-aware weighting); zeros when nothing was seen.
  std::vector<float> mean_sq() const;
};

class ActStats final : public ActObserver {
 public:
  void observe(const Matrix& W, const float* X, int n_tok) override;

  const ChannelStats* find(std::string_view weight) const;
  const std::map<std::string, ChannelStats, std::less<>>& weights() const { return stats_; }

  // Provenance, written with the statistics.
  uint64_t model_identity = 0;
  std::string model_name;
  uint64_t n_tokens = 0;
  std::string source;

  Result<void> save(const std::string& path) const;
  // Validates the file: type and version, four F32 statistics of consistent shapes per
  // weight, finite non-negative values.
  static Result<ActStats> load(const std::string& path);
  // Error unless these statistics were collected on `model` (same identity) and every
  // weight they name is a 2-D tensor of the model with as many columns.
  Result<void> check_matches(const GgufFile& model, uint64_t identity) const;

 private:
  std::map<std::string, ChannelStats, std::less<>> stats_;
};

}  // namespace pllm
