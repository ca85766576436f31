// What the Vulkan backend keeps between steps: the weights it uploaded, a device mirror of
// each sequence's KV cache, and the step's activation buffers (grown on demand).
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/vulkan/vk_matmul.h"
#include "backends/vulkan/vk_ops.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace pllm::vk {

// Weights on the device, uploaded the first time a step uses them (keyed by their host
// address: weights are immutable for the model's life).
class DeviceWeights {
 public:
  explicit DeviceWeights(Context& ctx) : ctx_(ctx) {}
  // A matrix in the file's row layout (panels are unpacked on the way).
  Result<DevMatrix> matrix(const Matrix& m);
  Result<View> vector(const float* p, int n);
  void clear() {
    mats_.clear();
    bufs_.clear();
  }
  size_t bytes() const { return bytes_; }

 private:
  Context& ctx_;
  std::unordered_map<const void*, DevMatrix> mats_;
  std::unordered_map<const void*, Buffer> bufs_;
  size_t bytes_ = 0;
};

// One sequence's KV cache on the device: positions 0 .. cap-1 of every layer, in the CPU
// cache's format (f32, f16 or q8), valid for positions < end while the CPU cache's stamp()
// equals `stamp`.
struct KvMirror {
  KvFormat format = KvFormat::f16;
  int cap = 0;
  int end = 0;
  uint64_t stamp = 0;
  struct Layer {
    Buffer buf;
    KvLayerViews views;
  };
  std::vector<Layer> layers;
};

// Bytes per element of K/V rows and whether scales are kept.
size_t kv_elem_bytes(KvFormat f);
// The format mirroring a CPU cache type; false for q4 (not mirrored).
bool kv_format_of(KvType t, KvFormat* f);
// Allocates layers of capacity cap (all regions aligned for binding).
Result<KvMirror> make_mirror(Context& ctx, KvFormat f, int n_layer, int kv_dim, int cap);
// Records copies of positions [0, n) of every layer from `from` into `to` (growth).
void copy_mirror(Recorder& rec, const KvMirror& from, KvMirror& to, int n, int kv_dim);
// Uploads positions [0, kv.end()) from the CPU cache (its prefix snapshot): unsupported
// where the cache cannot export one (sliding windows).
Result<void> upload_mirror(Context& ctx, const KvCache& kv, KvMirror& m);

// The step's activations [rows][width] on the device, and the host buffers it reads back.
struct StepBuffers {
  int rows = 0, out_rows = 0;
  Buffer x, h, q, k, v, att, gate, up, proj, sel;  // device
  Buffer x_in, cs, kv_out, logits;                 // host: embeddings in, RoPE tables, K/V and logits out
  // Grows every buffer to hold `rows` rows and `out_rows` logit rows.
  Result<void> reserve(Context& ctx, const ModelConfig& c, int n_vocab, int rows, int out_rows);
};

// Everything a step records with.
struct Backend {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Recorder> rec;
  std::unique_ptr<MatmulKernels> mm;
  std::unique_ptr<OpKernels> ops;
  std::unique_ptr<DeviceWeights> weights;
  StepBuffers bufs;
  std::unordered_map<const KvCache*, KvMirror> mirrors;
  std::vector<KvMirror> retired;  // old mirrors a growth copy still reads until the submit
};

}  // namespace pllm::vk
