#include "vision/mmproj.h"

#include "model/model.h"

#include <cstring>

#include "kernels/kernels.h"
#include "model/repack.h"
#include "quant/types.h"

namespace pllm::vision {

const char* projector_name(Projector p) {
  switch (p) {
    case Projector::idefics3: return "idefics3";
    case Projector::gemma3: return "gemma3";
  }
  return "?";
}

int VisionHparams::tokens_per_image() const {
  const int merged = n_merge > 0 ? patches_per_side() / n_merge : 0;  // the loader checks it divides
  return merged * merged;
}

namespace {

std::string shape_str(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

Error bad(const GgufFile& f, const std::string& what) { return make_error(Status::bad_format, f.path() + ": " + what); }

// A tensor of exactly these dims (ne[0] first), decoded to f32 whatever its type.
Result<std::vector<float>> tensor_f32(const GgufFile& f, const std::string& name, std::vector<uint64_t> dims) {
  const TensorInfo* t = f.tensor(name);
  if (!t) return bad(f, "missing tensor '" + name + "'");
  if (t->dims != dims) {
    std::string want = "[";
    for (size_t i = 0; i < dims.size(); ++i) want += (i ? ", " : "") + std::to_string(dims[i]);
    return bad(f, "tensor '" + name + "' has shape " + shape_str(*t) + ", expected " + want + "]");
  }
  const auto tr = type_traits(t->type);
  const TypeKernels& tk = kernels().for_type(static_cast<TensorType>(t->type));
  if (!tr || !tr->supported || !tk.available || !tk.dequantize_row)
    return make_error(Status::unsupported, f.path() + ": tensor '" + name + "' has type " +
                                               (tr ? tr->name : std::to_string(t->type)) + ", which is not supported");
  const int64_t row = int64_t(dims[0]);
  const auto rb = row_bytes(t->type, uint64_t(row));
  if (!rb) return bad(f, "tensor '" + name + "': rows of " + std::to_string(row) + " do not fit its type");
  const int64_t n_rows = int64_t(t->n_elements / uint64_t(row));
  std::vector<float> out(t->n_elements);
  for (int64_t r = 0; r < n_rows; ++r) tk.dequantize_row(t->data + size_t(r) * *rb, out.data() + r * row, row);
  return out;
}

Result<int> get_int(const GgufFile& f, const std::string& key, int lo, int hi) {
  PLLM_ASSIGN(uint64_t v, f.get_u64(key));
  if (v < uint64_t(lo) || v > uint64_t(hi))
    return bad(f, "'" + key + "' = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  return int(v);
}

Result<std::array<float, 3>> get_rgb(const GgufFile& f, const std::string& key, bool positive) {
  PLLM_ASSIGN(std::vector<double> v, f.get_f64_array(key));
  if (v.size() < 3) return bad(f, "'" + key + "' needs 3 values, has " + std::to_string(v.size()));
  std::array<float, 3> out{};
  for (int c = 0; c < 3; ++c) {
    out[c] = float(v[c]);
    if (!(out[c] == out[c]) || (positive && !(out[c] > 0.0f))) return bad(f, "'" + key + "' has an invalid value");
  }
  return out;
}

Result<VisionHparams> read_hparams(const GgufFile& f) {
  VisionHparams hp;
  PLLM_ASSIGN(std::string proj, f.get_string_or("clip.projector_type", ""));
  if (proj.empty()) {
    PLLM_ASSIGN(proj, f.get_string_or("clip.vision.projector_type", ""));
  }
  if (proj.empty()) return bad(f, "no clip.projector_type: not an mmproj file");
  if (proj == "idefics3") {
    hp.projector = Projector::idefics3;
    hp.filter = ResizeFilter::lanczos;
  } else if (proj == "gemma3") {
    hp.projector = Projector::gemma3;
    hp.filter = ResizeFilter::bilinear;
    hp.n_merge = 4;  // llama.cpp's default for the Gemma 3 family when the file has no scale factor
  } else {
    return make_error(Status::unsupported,
                      f.path() + ": vision projector type '" + proj + "' is not supported (supported: idefics3, gemma3)");
  }
  PLLM_ASSIGN(bool has_vision, f.get_bool("clip.has_vision_encoder"));
  if (!has_vision) return make_error(Status::unsupported, f.path() + ": the mmproj file has no vision encoder");
  // Bounds: generous for real encoders, tight enough that every product below fits in int.
  PLLM_ASSIGN(hp.image_size, get_int(f, "clip.vision.image_size", 1, 4096));
  PLLM_ASSIGN(hp.patch_size, get_int(f, "clip.vision.patch_size", 1, 256));
  PLLM_ASSIGN(hp.n_embd, get_int(f, "clip.vision.embedding_length", 1, 16384));
  PLLM_ASSIGN(hp.n_ff, get_int(f, "clip.vision.feed_forward_length", 1, 65536));
  PLLM_ASSIGN(hp.n_head, get_int(f, "clip.vision.attention.head_count", 1, 1024));
  PLLM_ASSIGN(hp.n_layer, get_int(f, "clip.vision.block_count", 1, 256));
  PLLM_ASSIGN(double eps, f.get_f64("clip.vision.attention.layer_norm_epsilon"));
  hp.eps = float(eps);
  if (!(hp.eps > 0.0f) || hp.eps > 1.0f) return bad(f, "clip.vision.attention.layer_norm_epsilon is out of range");
  PLLM_ASSIGN(hp.mean, get_rgb(f, "clip.vision.image_mean", false));
  PLLM_ASSIGN(hp.std, get_rgb(f, "clip.vision.image_std", true));
  if (f.find("clip.vision.projector.scale_factor")) {
    PLLM_ASSIGN(hp.n_merge, get_int(f, "clip.vision.projector.scale_factor", 1, 64));
  }
  if (hp.projector == Projector::idefics3) {
    if (hp.n_merge < 2) return bad(f, "idefics3 needs clip.vision.projector.scale_factor >= 2");
    // Files from before this key fall back to llama.cpp's llava-uhd slicing, not done here.
    if (!f.find("clip.vision.preproc_image_size"))
      return make_error(Status::unsupported, f.path() + ": idefics3 file without clip.vision.preproc_image_size "
                                                        "(an old conversion) is not supported");
    PLLM_ASSIGN(hp.longest_edge, get_int(f, "clip.vision.preproc_image_size", 1, 16384));
  }
  if (f.find("clip.use_silu")) {
    PLLM_ASSIGN(bool silu, f.get_bool("clip.use_silu"));
    if (silu) return make_error(Status::unsupported, f.path() + ": SiLU vision MLPs are not supported (only GELU)");
  }
  if (f.find("clip.use_gelu")) {
    PLLM_ASSIGN(bool gelu, f.get_bool("clip.use_gelu"));
    // Without use_gelu llama.cpp runs quick-GELU (CLIP); SigLIP files set it.
    if (!gelu) return make_error(Status::unsupported, f.path() + ": quick-GELU vision MLPs are not supported");
  } else {
    return make_error(Status::unsupported, f.path() + ": clip.use_gelu is absent (quick-GELU MLP), not supported");
  }
  if (hp.image_size % hp.patch_size != 0)
    return bad(f, "image size " + std::to_string(hp.image_size) + " is not a multiple of the patch size " +
                      std::to_string(hp.patch_size));
  if (hp.n_embd % hp.n_head != 0) return bad(f, "embedding length is not a multiple of the head count");
  // A hostile header could ask for a patch grid whose activations no phone holds (the tensors
  // that would have to match it are checked later, after these buffers' sizes are known):
  // bound the grid and the encoder's working set up front. Real encoders: SmolVLM 1024 patches
  // and ~30 MiB, Gemma 3 4096 patches and ~170 MiB.
  if (hp.n_patches() > kMaxPatches)
    return make_error(Status::out_of_range, f.path() + ": " + std::to_string(hp.n_patches()) +
                                                " patches per image, more than the limit of " + std::to_string(kMaxPatches));
  const int64_t act_bytes = int64_t(hp.n_patches()) * (6 * int64_t(hp.n_embd) + hp.n_ff) * int64_t(sizeof(float));
  if (act_bytes > kMaxActivationBytes)
    return make_error(Status::out_of_range, f.path() + ": the encoder would need " + std::to_string(act_bytes >> 20) +
                                                " MiB of activations, more than the limit of " +
                                                std::to_string(kMaxActivationBytes >> 20) + " MiB");
  // Both projectors merge n_merge x n_merge patches into a token. llama.cpp aborts on a grid
  // that does not divide (its token count disagrees with the graph's), so such a file has no
  // reference behaviour to follow: refused.
  if (hp.patches_per_side() % hp.n_merge != 0)
    return bad(f, "the patch grid (" + std::to_string(hp.patches_per_side()) + " a side) is not a multiple of the "
                      "projector's merge factor " + std::to_string(hp.n_merge));
  return hp;
}

Result<const float*> opt_vector(const GgufFile& f, const std::string& name, int64_t n) {
  if (!f.tensor(name)) return static_cast<const float*>(nullptr);
  return get_vector(f, name, n);
}

Result<VisionLayer> read_layer(const GgufFile& f, const VisionHparams& hp, int il) {
  const std::string p = "v.blk." + std::to_string(il) + ".";
  const int64_t E = hp.n_embd, F = hp.n_ff;
  VisionLayer L;
  PLLM_ASSIGN(L.ln1_w, get_vector(f, p + "ln1.weight", E));
  PLLM_ASSIGN(L.ln1_b, get_vector(f, p + "ln1.bias", E));
  PLLM_ASSIGN(L.ln2_w, get_vector(f, p + "ln2.weight", E));
  PLLM_ASSIGN(L.ln2_b, get_vector(f, p + "ln2.bias", E));
  if (f.tensor(p + "attn_qkv.weight"))
    return make_error(Status::unsupported, f.path() + ": fused attn_qkv vision weights are not supported");
  PLLM_ASSIGN(L.q, get_matrix(f, p + "attn_q.weight", E, E));
  PLLM_ASSIGN(L.k, get_matrix(f, p + "attn_k.weight", E, E));
  PLLM_ASSIGN(L.v, get_matrix(f, p + "attn_v.weight", E, E));
  PLLM_ASSIGN(L.o, get_matrix(f, p + "attn_out.weight", E, E));
  PLLM_ASSIGN(L.q_b, opt_vector(f, p + "attn_q.bias", E));
  PLLM_ASSIGN(L.k_b, opt_vector(f, p + "attn_k.bias", E));
  PLLM_ASSIGN(L.v_b, opt_vector(f, p + "attn_v.bias", E));
  PLLM_ASSIGN(L.o_b, opt_vector(f, p + "attn_out.bias", E));
  // Old conversions named fc1 "ffn_down" and fc2 "ffn_up"; llama.cpp swaps them back when
  // ffn_down's rows have the embedding's length, and so do we.
  std::string up = "ffn_up", down = "ffn_down";
  const TensorInfo* d = f.tensor(p + "ffn_down.weight");
  if (d && F != E && !d->dims.empty() && d->dims[0] == uint64_t(E)) std::swap(up, down);
  PLLM_ASSIGN(L.up, get_matrix(f, p + up + ".weight", F, E));
  PLLM_ASSIGN(L.down, get_matrix(f, p + down + ".weight", E, F));
  PLLM_ASSIGN(L.up_b, opt_vector(f, p + up + ".bias", F));
  PLLM_ASSIGN(L.down_b, opt_vector(f, p + down + ".bias", E));
  return L;
}

}  // namespace

Result<std::shared_ptr<VisionModel>> load_mmproj(const std::string& path, RepackMode repack) {
  PLLM_ASSIGN(auto file, GgufFile::open(path));
  return load_mmproj(std::move(file), repack);
}

Result<std::shared_ptr<VisionModel>> load_mmproj(std::shared_ptr<GgufFile> file, RepackMode repack) {
  const GgufFile& f = *file;
  auto m = std::make_shared<VisionModel>();
  m->file = file;
  m->identity = compute_model_identity(f);
  PLLM_ASSIGN(m->hp, read_hparams(f));
  const VisionHparams& hp = m->hp;
  const uint64_t E = uint64_t(hp.n_embd), P = uint64_t(hp.patch_size);

  PLLM_ASSIGN(m->patch_w, tensor_f32(f, "v.patch_embd.weight", {P, P, 3, E}));
  if (f.tensor("v.patch_embd.bias")) {
    PLLM_ASSIGN(m->patch_b, tensor_f32(f, "v.patch_embd.bias", {E}));
  } else {
    m->patch_b.assign(E, 0.0f);
  }
  PLLM_ASSIGN(m->pos_embd, tensor_f32(f, "v.position_embd.weight", {E, uint64_t(hp.n_patches())}));
  if (f.tensor("v.pre_ln.weight"))
    return make_error(Status::unsupported, f.path() + ": a pre-layernorm (CLIP-style ViT) is not supported");
  if (f.tensor("v.class_embd"))
    return make_error(Status::unsupported, f.path() + ": a class embedding (CLIP-style ViT) is not supported");
  m->layers.reserve(size_t(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    PLLM_ASSIGN(VisionLayer L, read_layer(f, hp, il));
    m->layers.push_back(L);
  }
  PLLM_ASSIGN(m->post_ln_w, get_vector(f, "v.post_ln.weight", int64_t(E)));
  PLLM_ASSIGN(m->post_ln_b, get_vector(f, "v.post_ln.bias", int64_t(E)));

  if (hp.projector == Projector::idefics3) {
    const TensorInfo* t = f.tensor("mm.model.fc.weight");
    if (!t) return bad(f, "missing tensor 'mm.model.fc.weight'");
    if (t->dims.size() != 2 || t->dims[1] < 1 || t->dims[1] > 65536) return bad(f, "tensor 'mm.model.fc.weight' has shape " + shape_str(*t));
    m->hp.n_out = int(t->dims[1]);
    const int64_t in = int64_t(E) * hp.n_merge * hp.n_merge;
    PLLM_ASSIGN(m->mm_fc, get_matrix(f, "mm.model.fc.weight", m->hp.n_out, in));
  } else {
    PLLM_ASSIGN(m->soft_emb_norm_w, get_vector(f, "mm.soft_emb_norm.weight", int64_t(E)));
    const TensorInfo* t = f.tensor("mm.input_projection.weight");
    if (!t) return bad(f, "missing tensor 'mm.input_projection.weight'");
    if (t->dims.size() != 2 || t->dims[0] < 1 || t->dims[0] > 65536)
      return bad(f, "tensor 'mm.input_projection.weight' has shape " + shape_str(*t));
    const int n_out = int(t->dims[0]);
    m->hp.n_out = n_out;
    PLLM_ASSIGN(std::vector<float> w, tensor_f32(f, "mm.input_projection.weight", {uint64_t(n_out), E}));
    m->mm_proj_t.resize(w.size());
    for (uint64_t i = 0; i < E; ++i)
      for (int j = 0; j < n_out; ++j) m->mm_proj_t[size_t(j) * E + i] = w[i * uint64_t(n_out) + uint64_t(j)];
    Matrix& mp = m->mm_proj;
    mp.name = "mm.input_projection.weight";
    mp.data = reinterpret_cast<const uint8_t*>(m->mm_proj_t.data());
    mp.type = TensorType::F32;
    mp.rows = n_out;
    mp.cols = int64_t(E);
    mp.row_bytes = size_t(E) * sizeof(float);
  }
  if (repack != RepackMode::none) {
    std::vector<Matrix*> mats{&m->mm_fc};
    std::vector<const float**> vecs{&m->post_ln_w, &m->post_ln_b, &m->soft_emb_norm_w};
    for (VisionLayer& L : m->layers) {
      mats.insert(mats.end(), {&L.q, &L.k, &L.v, &L.o, &L.up, &L.down});
      vecs.insert(vecs.end(), {&L.ln1_w, &L.ln1_b, &L.q_b, &L.k_b, &L.v_b, &L.o_b, &L.ln2_w, &L.ln2_b, &L.up_b, &L.down_b});
    }
    m->repacked_tensors = repack_matrices(mats, vecs, kernels(), f, m->repacked, repack).tensors;
  }
  return m;
}

}  // namespace pllm::vision
