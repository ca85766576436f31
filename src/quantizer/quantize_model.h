// Whole-file quantisation: every 2-D weight is dequantised to f32 and quantised to the
// type type_plan.h chooses, with the chosen method; other tensors are written as F32.
// The metadata is copied, with general.file_type, general.quantization_version and
// pocketllm.quantize.* provenance keys set. A mix's rules (plan.mix) read the model's
// shape (mix_shape), filled in here.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "gguf/gguf.h"
#include "quantizer/act_stats.h"
#include "quantizer/row_quant.h"
#include "quantizer/type_plan.h"

namespace pllm {

// Importance is floored at this fraction of the tensor's mean importance, so columns the
// calibration text (almost) never activated are still quantised with some care.
inline constexpr float kImportanceFloor = 0.01f;

struct QuantizeOptions {
  TypePlanOptions plan;
  QuantMethod method = QuantMethod::rtn;
  const ActStats* stats = nullptr;  // required for QuantMethod::act
  int n_threads = 0;                // 0: default_thread_count()
  // Called before each tensor (index, count, name).
  std::function<void(size_t, size_t, std::string_view)> progress;
};

struct TensorReport {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t in_type = 0;
  TypeChoice choice;
  uint64_t n_elements = 0;
  uint64_t bytes = 0;     // written
  bool weighted = false;  // act: importance from the statistics was used
};

struct QuantizeReport {
  std::vector<TensorReport> tensors;
  uint64_t file_bytes = 0;
  double seconds = 0;
  uint64_t weight_elements() const;  // of the 2-D weights
  uint64_t weight_bytes() const;
  double weight_bpw() const;         // bits per weight of the 2-D weights
};

// Per-column weights for the act method: mean x², floored (kImportanceFloor).
std::vector<float> column_importance(const ChannelStats& s);

// All elements of a tensor as f32; error for a type the quantiser cannot read or a
// non-finite value.
Result<std::vector<float>> dequantize_tensor(const TensorInfo& t);

// rows x cols f32 values quantised to `type` row by row over the pool; importance: null
// or [cols] (act). cols must fit the type's block.
std::vector<uint8_t> quantize_matrix(const float* x, int64_t rows, int64_t cols, TensorType type, QuantMethod method,
                                     const float* importance, ThreadPool& pool);

Result<QuantizeReport> quantize_file(const GgufFile& in, const std::string& out_path, const QuantizeOptions& opts);

}  // namespace pllm
