#include "model/model.h"

#include <algorithm>
#include <initializer_list>

#include "base/hash.h"
#include "kernels/kernels.h"
#include "model/arch.h"
#include "model/repack.h"

namespace pllm {

// Metadata of every tensor plus a sample of the data: cheap (2 MiB read), and different
// files of the same architecture differ in their first or last weights.
uint64_t compute_model_identity(const GgufFile& f) {
  Hasher h(0x4d4f44454cull);
  const uint8_t* lo = nullptr;
  const uint8_t* hi = nullptr;
  for (const TensorInfo& t : f.tensors()) {
    h.update(t.name.data(), t.name.size());
    h.update_u64(t.type);
    h.update_u64(t.dims.size());
    for (uint64_t d : t.dims) h.update_u64(d);
    h.update_u64(t.offset);
    if (t.n_bytes == 0) continue;
    if (!lo || t.data < lo) lo = t.data;
    if (!hi || t.data + t.n_bytes > hi) hi = t.data + t.n_bytes;
  }
  if (lo && hi > lo) {
    const size_t span = size_t(hi - lo), mb = size_t(1) << 20;
    h.update(lo, std::min(span, mb));
    if (span > mb) h.update(hi - std::min(span - mb, mb), std::min(span - mb, mb));
  }
  return h.digest();
}

Result<std::shared_ptr<const Model>> Model::load(const std::string& path, bool vocab_only,
                                                 const Progress& progress, RepackMode repack) {
  PLLM_ASSIGN(std::shared_ptr<Model> m, load_impl(path, vocab_only, progress, repack));
  return std::shared_ptr<const Model>(std::move(m));
}

Result<std::shared_ptr<const Model>> Model::load(std::shared_ptr<GgufFile> file, bool vocab_only) {
  PLLM_ASSIGN(std::shared_ptr<Model> m, load_file(std::move(file), vocab_only, {}, RepackMode::none));
  return std::shared_ptr<const Model>(std::move(m));
}

namespace {

// general.sampling.* (written by llama.cpp's converter when a model publishes its preferred
// sampling): each key present replaces kModelDefaultSampling's value; a key of the wrong type
// or out of range is a load error naming it.
Result<SamplingConfig> sampling_from_file(const GgufFile& f, const std::string& path) {
  SamplingConfig c = kModelDefaultSampling;
  auto real = [&](const char* key, float& v, double lo, double hi) -> Result<void> {
    PLLM_ASSIGN(double x, f.get_f64_or(key, v));
    if (!(x >= lo && x <= hi))
      return make_error(Status::bad_format, path + ": " + key + " = " + std::to_string(x) + " is out of range");
    v = float(x);
    return {};
  };
  auto whole = [&](const char* key, int& v, int64_t lo, int64_t hi) -> Result<void> {
    if (!f.find(key)) return {};
    PLLM_ASSIGN(double x, f.get_f64(key));
    if (!(x >= double(lo) && x <= double(hi)) || x != double(int64_t(x)))
      return make_error(Status::bad_format, path + ": " + key + " = " + std::to_string(x) + " is out of range");
    v = int(x);
    return {};
  };
  PLLM_TRY(real("general.sampling.temp", c.temperature, 0.0, 100.0));
  PLLM_TRY(whole("general.sampling.top_k", c.top_k, 0, 1 << 24));
  PLLM_TRY(real("general.sampling.top_p", c.top_p, 1e-6, 1.0));
  PLLM_TRY(real("general.sampling.min_p", c.min_p, 0.0, 1.0));
  PLLM_TRY(real("general.sampling.penalty_repeat", c.repeat_penalty, 1e-3, 100.0));
  PLLM_TRY(whole("general.sampling.penalty_last_n", c.repeat_last_n, -1, 1 << 24));
  return c;
}

}  // namespace

Result<std::shared_ptr<Model>> Model::load_for_tools(const std::string& path) { return load_impl(path, false, {}, RepackMode::none); }

Result<std::shared_ptr<Model>> Model::load_impl(const std::string& path, bool vocab_only, const Progress& progress,
                                                RepackMode repack) {
  auto report = [&](float p) { return !progress || progress(p); };
  if (!report(0.0f)) return make_error(Status::cancelled, path + ": load cancelled");
  PLLM_ASSIGN(auto file, GgufFile::open(path));
  return load_file(std::move(file), vocab_only, progress, repack);
}

Result<std::shared_ptr<Model>> Model::load_file(std::shared_ptr<GgufFile> file, bool vocab_only,
                                                const Progress& progress, RepackMode repack) {
  auto report = [&](float p) { return !progress || progress(p); };
  const std::string& path = file->path();
  auto m = std::shared_ptr<Model>(new Model());
  m->file_ = file;
  m->vocab_only_ = vocab_only;
  if (!report(0.3f)) return make_error(Status::cancelled, path + ": load cancelled");

  PLLM_ASSIGN(m->tokenizer_, Tokenizer::from_gguf(*file));
  PLLM_ASSIGN(m->chat_template_, file->get_string_or("tokenizer.chat_template", ""));
  m->chat_family_ = detect_chat_family(m->chat_template_);
  if (m->chat_template_.empty()) {
    // No template in the file: Gemma's turn markers (arch gemma*, or the vocabulary has
    // them) mean the gemma layout (Gemma 4's own); otherwise ChatML.
    PLLM_ASSIGN(std::string arch, file->get_string_or("general.architecture", ""));
    if (arch == "gemma4" || (m->tokenizer_->find_token("<|turn>") >= 0 && m->tokenizer_->find_token("<turn|>") >= 0))
      m->chat_family_ = ChatFamily::gemma4;
    else if (arch.rfind("gemma", 0) == 0 || (m->tokenizer_->find_token("<start_of_turn>") >= 0 &&
                                              m->tokenizer_->find_token("<end_of_turn>") >= 0))
      m->chat_family_ = ChatFamily::gemma;
  }
  if (m->chat_family_ == ChatFamily::unknown) m->chat_family_ = ChatFamily::chatml;
  PLLM_ASSIGN(m->sampling_defaults_, sampling_from_file(*file, path));
  if (!report(0.5f)) return make_error(Status::cancelled, path + ": load cancelled");

  if (!vocab_only) {
    PLLM_ASSIGN(std::string arch, file->get_string("general.architecture"));
    m->arch_ = find_arch(arch);
    if (!m->arch_)
      return make_error(Status::unsupported, path + ": architecture '" + arch +
                                                 "' is not supported (supported: " + supported_arch_names() + ")");
    PLLM_ASSIGN(m->config_, m->arch_->read_config(*file));
    PLLM_TRY(m->arch_->load_weights(*file, m->config_, m->weights_));
    PLLM_ASSIGN(m->act_scale_counts_, apply_act_scales(*file, m->weights_));
    m->config_.n_vocab = static_cast<int>(m->weights_.token_embd.rows);
    if (m->config_.n_vocab != m->tokenizer_->n_vocab())
      return make_error(Status::bad_format, path + ": tokenizer has " + std::to_string(m->tokenizer_->n_vocab()) +
                                                " tokens but token_embd has " +
                                                std::to_string(m->config_.n_vocab) + " rows");
  } else {
    PLLM_ASSIGN(m->config_.arch, file->get_string_or("general.architecture", ""));
    m->config_.n_vocab = m->tokenizer_->n_vocab();
  }
  m->identity_ = compute_model_identity(*file);  // before repacking: it samples the file's bytes
  if (repack != RepackMode::none && !vocab_only) {
    const RepackResult r = repack_weights(m->weights_, kernels(), *file, m->repacked_, repack);
    m->repacked_tensors_ = r.tensors;
    m->copied_tensors_ = r.copied;
  }
  if (!report(1.0f)) return make_error(Status::cancelled, path + ": load cancelled");
  return m;
}

namespace {

// Every weight view of the model (the tied output head included).
template <class Fn>
void for_each_matrix(ModelWeights& w, Fn fn) {
  fn(w.token_embd);
  fn(w.output);
  for (LayerWeights& L : w.layers)
    for (Matrix* m : L.matrices()) fn(*m);
}

}  // namespace

Result<void> Model::override_matrix(std::string_view name, TensorType type, const uint8_t* data) {
  const TensorInfo* t = file_->tensor(name);
  if (!t || t->dims.size() != 2)
    return make_error(Status::invalid_argument, "no 2-D tensor '" + std::string(name) + "' to override");
  auto rb = row_bytes(uint32_t(type), t->dims[0]);
  if (!rb || !kernels().for_type(type).available)
    return make_error(Status::unsupported, "cannot compute tensor '" + std::string(name) + "' as type " +
                                               std::to_string(uint32_t(type)));
  int n = 0;
  for_each_matrix(weights_, [&](Matrix& m) {
    if (m.name != name) return;
    m.data = data;
    m.type = type;
    m.row_bytes = size_t(*rb);
    m.panels = false;  // load_for_tools never repacks; the override is in the file's layout
    ++n;
  });
  if (n == 0) return make_error(Status::invalid_argument, "tensor '" + std::string(name) + "' is not a weight the model uses");
  return {};
}

Result<void> Model::restore_matrix(std::string_view name) {
  const TensorInfo* t = file_->tensor(name);
  if (!t) return make_error(Status::invalid_argument, "no tensor '" + std::string(name) + "'");
  return override_matrix(name, static_cast<TensorType>(t->type), t->data);
}

Result<void> Model::override_output_bias(std::string_view weight, const float* bias) {
  for (LayerWeights& L : weights_.layers) {
    if (L.wo.name == weight) {
      L.bo = bias;
      return {};
    }
    if (L.w_down.name == weight) {
      L.b_down = bias;
      return {};
    }
  }
  return make_error(Status::invalid_argument, "'" + std::string(weight) + "' is no attn_output or ffn_down weight");
}

Result<void> Model::restore_output_bias(std::string_view weight) {
  std::string name(weight);
  const size_t dot = name.rfind(".weight");
  if (dot == std::string::npos) return make_error(Status::invalid_argument, "no weight '" + name + "'");
  name.replace(dot, std::string::npos, ".bias");
  const TensorInfo* t = file_->tensor(name);
  return override_output_bias(weight, t ? reinterpret_cast<const float*>(t->data) : nullptr);
}

Result<void> Model::run_layers(LayerOps& ops) const {
  if (!arch_) return make_error(Status::invalid_argument, "model was loaded vocab-only");
  return arch_->forward(*this, ops);
}

}  // namespace pllm
