// Whole-file quantisation (see quantize_model.h).
#include "quantizer/quantize_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>

#include "base/checked.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"

namespace pllm {

uint64_t QuantizeReport::weight_elements() const {
  uint64_t n = 0;
  for (const TensorReport& t : tensors)
    if (t.choice.quantized) n += t.n_elements;
  return n;
}

uint64_t QuantizeReport::weight_bytes() const {
  uint64_t n = 0;
  for (const TensorReport& t : tensors)
    if (t.choice.quantized) n += t.bytes;
  return n;
}

double QuantizeReport::weight_bpw() const {
  const uint64_t n = weight_elements();
  return n ? 8.0 * double(weight_bytes()) / double(n) : 0.0;
}

std::vector<float> column_importance(const ChannelStats& s) {
  std::vector<float> w = s.mean_sq();
  double mean = 0;
  for (float v : w) mean += v;
  mean = w.empty() ? 0.0 : mean / double(w.size());
  const float floor = float(mean) * kImportanceFloor;
  for (float& v : w) v = std::max(v, floor);
  return w;
}

Result<std::vector<float>> dequantize_tensor(const TensorInfo& t) {
  if (!is_input_type(t.type)) {
    const auto tr = type_traits(t.type);
    return make_error(Status::unsupported, "tensor '" + t.name + "' has type " +
                                               (tr ? tr->name : std::to_string(t.type)) +
                                               ", which the quantiser cannot read");
  }
  const uint64_t cols = t.dims[0], rows = t.n_elements / cols;
  const uint64_t rb = *row_bytes(t.type, cols);  // the reader checked the block fit
  std::vector<float> out;
  try {
    out.resize(size_t(t.n_elements));
  } catch (const std::bad_alloc&) {
    return make_error(Status::out_of_memory, "not enough memory to dequantise tensor '" + t.name + "'");
  }
  for (uint64_t r = 0; r < rows; ++r)
    dequantize_row_any(t.type, t.data + r * rb, out.data() + r * cols, int64_t(cols));
  for (float v : out)
    if (!std::isfinite(v)) return make_error(Status::bad_format, "tensor '" + t.name + "' holds a non-finite value");
  return out;
}

std::vector<uint8_t> quantize_matrix(const float* x, int64_t rows, int64_t cols, TensorType type, QuantMethod method,
                                     const float* importance, ThreadPool& pool) {
  const size_t rb = size_t(*row_bytes(uint32_t(type), uint64_t(cols)));
  std::vector<uint8_t> out(rb * size_t(rows));
  const bool search = method != QuantMethod::rtn;
  const int64_t per_task = 16;
  pool.run((rows + per_task - 1) / per_task, [&](int64_t task) {
    const int64_t r1 = std::min(rows, (task + 1) * per_task);
    for (int64_t r = task * per_task; r < r1; ++r)
      quantize_row_to(type, x + r * cols, importance, search, out.data() + size_t(r) * rb, cols);
  });
  return out;
}

Result<QuantizeReport> quantize_file(const GgufFile& in, const std::string& out_path, const QuantizeOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!is_output_type(opts.plan.base))
    return make_error(Status::invalid_argument, "cannot write type " + quant_type_name(opts.plan.base));
  if (opts.method == QuantMethod::act) {
    if (!opts.stats)
      return make_error(Status::invalid_argument, "method act needs activation statistics (--calib or --stats)");
    PLLM_TRY(opts.stats->check_matches(in, compute_model_identity(in)));
  }
  GgufWriter w;
  w.copy_metadata(in);
  for (const auto& [key, v] : in.metadata())
    if (key.rfind("pocketllm.quantize.", 0) == 0) w.remove(key);  // provenance of an earlier run
  const QuantPreset preset{opts.plan.base, opts.plan.mix};
  w.set_u32("general.file_type", llama_file_type(preset));
  w.set_string("pocketllm.quantize.type", quant_preset_name(preset));
  w.set_string("pocketllm.quantize.method", quant_method_name(opts.method));
  if (opts.method == QuantMethod::act) {
    w.set_string("pocketllm.quantize.calib_source", opts.stats->source);
    w.set_u64("pocketllm.quantize.calib_tokens", opts.stats->n_tokens);
  }

  TypePlanOptions plan = opts.plan;
  if (plan.mix != QuantMix::none) plan.shape = mix_shape(in);
  ThreadPool pool(opts.n_threads > 0 ? opts.n_threads : default_thread_count());
  const bool has_output = in.tensor("output.weight") != nullptr;
  QuantizeReport rep;
  bool any_quantized_type = false;
  const size_t n = in.tensors().size();
  for (size_t i = 0; i < n; ++i) {
    const TensorInfo& t = in.tensors()[i];
    if (opts.progress) opts.progress(i, n, t.name);
    TensorReport tr;
    tr.name = t.name;
    tr.dims = t.dims;
    tr.in_type = t.type;
    tr.n_elements = t.n_elements;
    tr.choice = choose_tensor_type(t.name, t.dims, has_output, plan);
    PLLM_ASSIGN(std::vector<float> x, dequantize_tensor(t));
    std::vector<uint8_t> bytes;
    if (!tr.choice.quantized) {
      bytes.resize(x.size() * sizeof(float));  // x fitted in memory: 4 bytes each fit size_t
      std::memcpy(bytes.data(), x.data(), bytes.size());
    } else {
      const int64_t cols = int64_t(t.dims[0]), rows = int64_t(t.n_elements / t.dims[0]);
      std::vector<float> imp;
      if (opts.method == QuantMethod::act) {
        if (const ChannelStats* s = opts.stats->find(t.name)) {
          imp = column_importance(*s);
          tr.weighted = true;
        }
      }
      const auto out_bytes = checked_mul(*row_bytes(uint32_t(tr.choice.type), uint64_t(cols)), uint64_t(rows));
      if (!out_bytes || *out_bytes > (uint64_t(1) << 48))
        return make_error(Status::out_of_range, "tensor '" + t.name + "' is too large to quantise");
      try {
        bytes = quantize_matrix(x.data(), rows, cols, tr.choice.type, opts.method, imp.empty() ? nullptr : imp.data(),
                                pool);
      } catch (const std::bad_alloc&) {
        return make_error(Status::out_of_memory, "not enough memory to quantise tensor '" + t.name + "'");
      }
      const auto traits = type_traits(uint32_t(tr.choice.type));
      any_quantized_type = any_quantized_type || traits->block_elems > 1;
    }
    tr.bytes = bytes.size();
    PLLM_TRY(w.add_tensor(t.name, tr.choice.quantized ? uint32_t(tr.choice.type) : uint32_t(TensorType::F32), t.dims,
                          std::move(bytes)));
    rep.tensors.push_back(std::move(tr));
  }
  if (any_quantized_type) w.set_u32("general.quantization_version", 2);
  else w.remove("general.quantization_version");
  if (opts.progress) opts.progress(n, n, "");
  PLLM_TRY(w.write(out_path));
  struct stat st {};
  if (::stat(out_path.c_str(), &st) == 0) rep.file_bytes = uint64_t(st.st_size);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace pllm
