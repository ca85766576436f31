// A vision encoder in llama.cpp's mmproj (`clip`) GGUF format: its hyper-parameters and weights.
//
// Supported: SigLIP ViTs with the projectors `idefics3` (SmolVLM: pixel shuffle + one linear) and
// `gemma3` (average pool + soft-embedding RMS norm + one linear). Any other projector type is a
// clear `unsupported` error naming it. Matmul weights stay in the mapping (F32, F16, Q8_0, any
// type the kernels take); the small tensors the encoder uses in other shapes (patch embedding,
// position embeddings, gemma3's transposed projection) are decoded to f32 once at load.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/result.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/weights.h"

namespace pllm::vision {

enum class Projector { idefics3, gemma3 };
const char* projector_name(Projector p);

// How llama.cpp resamples for a projector (mtmd-image.cpp follows Pillow's filters).
enum class ResizeFilter { bilinear, bicubic, lanczos };

// Limits on what an mmproj header may ask for (load errors, out_of_range, beyond them).
inline constexpr int kMaxPatches = 16384;                        // a 128 x 128 patch grid
inline constexpr int64_t kMaxActivationBytes = int64_t(2) << 30;  // the encoder's working set

struct VisionHparams {
  Projector projector = Projector::idefics3;
  int image_size = 0;    // the square the encoder sees
  int patch_size = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_layer = 0;
  int n_merge = 1;       // idefics3: pixel-shuffle factor; gemma3: pooling kernel (per side)
  int n_out = 0;         // output width (the text model's embedding width)
  int longest_edge = 0;  // idefics3: clip.vision.preproc_image_size; 0 when absent
  float eps = 1e-6f;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  ResizeFilter filter = ResizeFilter::bicubic;

  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  // Output tokens of one square image_size x image_size input.
  int tokens_per_image() const;
};

struct VisionLayer {
  const float* ln1_w = nullptr;
  const float* ln1_b = nullptr;
  Matrix q, k, v, o;
  const float* q_b = nullptr;
  const float* k_b = nullptr;
  const float* v_b = nullptr;
  const float* o_b = nullptr;
  const float* ln2_w = nullptr;
  const float* ln2_b = nullptr;
  Matrix up, down;
  const float* up_b = nullptr;
  const float* down_b = nullptr;
};

struct VisionModel {
  std::shared_ptr<GgufFile> file;
  uint64_t identity = 0;  // of the file (compute_model_identity): image row ids depend on it
  VisionHparams hp;
  // [n_embd][3 * patch * patch], inner order (channel, y, x): the conv as a matmul over patches.
  std::vector<float> patch_w;
  std::vector<float> patch_b;  // [n_embd] (zeros when the file has none)
  std::vector<float> pos_embd;  // [n_patches][n_embd]
  std::vector<VisionLayer> layers;
  const float* post_ln_w = nullptr;
  const float* post_ln_b = nullptr;
  // idefics3
  Matrix mm_fc;  // [n_out][n_embd * n_merge^2]
  // gemma3
  const float* soft_emb_norm_w = nullptr;
  // The file stores this projection transposed ([n_embd] rows of n_out): decoded to f32 and
  // transposed once (mm_proj_t, [n_out][n_embd]) so that it runs as an ordinary F32 product.
  Matrix mm_proj;
  std::vector<float> mm_proj_t;
  // The matrices held as 16-row panels (and the rest of the file's weights beside them) when
  // loaded with a repack mode: model/repack.h, as for a text model.
  std::vector<AlignedBuffer<uint8_t>> repacked;
  int repacked_tensors = 0;
};

// Opens and checks an mmproj file. Errors name the file and the key or tensor at fault.
// repack: the panels the encoder's activation mode reads (repack_for(EncodeOptions::act));
// an encode in another mode still runs, unpacking panels as it goes.
Result<std::shared_ptr<VisionModel>> load_mmproj(const std::string& path, RepackMode repack = RepackMode::none);
// The same over an already-open GGUF file (the fuzzer: never repacked).
Result<std::shared_ptr<VisionModel>> load_mmproj(std::shared_ptr<GgufFile> file, RepackMode repack = RepackMode::none);

}  // namespace pllm::vision
