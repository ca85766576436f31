// The C API's images: pllm_vision (an mmproj paired with a model) and pllm_vision_tokenize.
// Without the vision layer in the build (no libstb-dev headers) every call says so.
#include "api/api_internal.h"

#if PLLM_HAVE_VISION
#include "vision/image_prompt.h"
#endif

using namespace pllm_api;

struct pllm_vision {
#if PLLM_HAVE_VISION
  std::shared_ptr<const pllm::vision::VisionModel> vision;
  std::shared_ptr<const pllm::Model> model;  // the text model it was paired with
  pllm::vision::EncodeOptions encode;
#endif
};

#if PLLM_HAVE_VISION

pllm_status pllm_vision_load(const pllm_model* model, const char* mmproj_path, int int8_activations,
                             pllm_vision** out) {
  return guarded([&] {
    if (!model || !mmproj_path || !out) return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_vision_load: null argument");
    *out = nullptr;
    const pllm::ActMode act = int8_activations ? pllm::ActMode::int8 : pllm::kDefaultActMode;
    auto vm = pllm::vision::load_mmproj(mmproj_path, pllm::repack_for(act));
    if (!vm.ok()) return fail(vm.error());
    if (auto r = pllm::vision::check_pairing(*model->model, **vm); !r.ok()) return fail(r.error());
    auto v = std::make_unique<pllm_vision>();
    v->vision = std::move(*vm);
    v->model = model->model;
    v->encode.act = act;
    *out = v.release();
    return PLLM_OK;
  });
}

int32_t pllm_vision_tokens_per_tile(const pllm_vision* v) { return v ? v->vision->hp.tokens_per_image() : 0; }

pllm_status pllm_vision_tokenize(const pllm_vision* v, pllm_session* s, const char* text, size_t text_len,
                                 const pllm_image* images, size_t n_images, pllm_token* out, size_t capacity,
                                 size_t* n_out) {
  return guarded([&] {
    if (!v || !s || (!text && text_len) || (!images && n_images) || (!out && capacity))
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_vision_tokenize: null argument");
    if (&s->session->model() != v->model.get())
      return fail(PLLM_ERR_INVALID_ARGUMENT, "pllm_vision_tokenize: the session runs another model than the vision "
                                             "encoder was loaded for");
    std::vector<pllm::vision::ImageU8> decoded;
    for (size_t i = 0; i < n_images; ++i) {
      auto img = pllm::vision::decode_image(images[i].data, images[i].size);
      if (!img.ok())
        return fail(to_status(img.error().code), "image " + std::to_string(i) + ": " + img.error().message);
      decoded.push_back(std::move(*img));
    }
    auto p = pllm::vision::build_image_prompt(*v->model, v->vision, std::string_view(text ? text : "", text_len),
                                              decoded, s->session->image_rows(), v->encode);
    if (!p.ok()) return fail(p.error());
    return copy_out(p->data(), p->size(), sizeof(pllm_token), out, capacity, n_out);
  });
}

#else

pllm_status pllm_vision_load(const pllm_model*, const char*, int, pllm_vision** out) {
  if (out) *out = nullptr;
  return fail(PLLM_ERR_UNSUPPORTED, "this build has no vision layer (built without Debian's libstb-dev)");
}

int32_t pllm_vision_tokens_per_tile(const pllm_vision*) { return 0; }

pllm_status pllm_vision_tokenize(const pllm_vision*, pllm_session*, const char*, size_t, const pllm_image*, size_t,
                                 pllm_token*, size_t, size_t*) {
  return fail(PLLM_ERR_UNSUPPORTED, "this build has no vision layer (built without Debian's libstb-dev)");
}

#endif

void pllm_vision_free(pllm_vision* v) { delete v; }
