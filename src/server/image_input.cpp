#include "server/image_input.h"

#include <openssl/evp.h>

#if PLLM_HAVE_VISION
#include "vision/image_prompt.h"
#endif

namespace pllm::server {

Result<std::vector<uint8_t>> data_uri_bytes(const std::string& url) {
  if (url.rfind("data:", 0) != 0) {
    const size_t colon = url.find(':');
    const std::string scheme = colon == std::string::npos || colon > 16 ? "" : url.substr(0, colon);
    return make_error(Status::invalid_argument,
                      (scheme.empty() ? std::string("an image url that is not a data: URI")
                                      : "a " + scheme + ": image url") +
                          ": the server fetches nothing; send the image inline as data:image/png;base64,...");
  }
  const size_t comma = url.find(',');
  if (comma == std::string::npos) return make_error(Status::invalid_argument, "a data: URI without ','");
  const std::string meta = url.substr(5, comma - 5);
  if (meta.size() < 7 || meta.compare(meta.size() - 7, 7, ";base64") != 0)
    return make_error(Status::invalid_argument, "an image data: URI must be base64 (data:image/png;base64,...)");
  const std::string_view b64(url.data() + comma + 1, url.size() - comma - 1);
  if (b64.empty() || b64.size() % 4 != 0 || b64.size() > (size_t(1) << 30))
    return make_error(Status::invalid_argument, "the image's base64 is not a whole number of 4-character groups");
  std::vector<uint8_t> out(b64.size() / 4 * 3);
  // OpenSSL's decoder (strict: any character outside the alphabet fails it); it counts the
  // '=' padding as zero bytes, which are taken off after.
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(b64.data()), int(b64.size()));
  if (n < 0) return make_error(Status::invalid_argument, "the image's base64 does not decode");
  const size_t pad = size_t(b64.back() == '=') + size_t(b64.size() >= 2 && b64[b64.size() - 2] == '=');
  out.resize(size_t(n) - pad);
  return out;
}

#if PLLM_HAVE_VISION

struct ServerVision {
  std::shared_ptr<const vision::VisionModel> model;
  vision::EncodeOptions encode;
  std::shared_ptr<ImageRows> rows = std::make_shared<ImageRows>();
};

Result<std::shared_ptr<ServerVision>> load_server_vision(const Model& model, const std::string& mmproj, bool int8) {
  const ActMode act = int8 ? ActMode::int8 : kDefaultActMode;
  PLLM_ASSIGN(std::shared_ptr<vision::VisionModel> vm, vision::load_mmproj(mmproj, repack_for(act)));
  PLLM_TRY(vision::check_pairing(model, *vm));
  auto v = std::make_shared<ServerVision>();
  v->model = std::move(vm);
  v->encode.act = act;
  return v;
}

std::shared_ptr<ImageRows> server_image_rows(const ServerVision& v) { return v.rows; }

int server_vision_tile_rows(const ServerVision& v) { return v.model->hp.tokens_per_image(); }

Result<std::vector<int32_t>> image_prompt_ids(const ServerVision& v, const Model& model, const std::string& text,
                                              const std::vector<std::string>& urls) {
  std::vector<vision::ImageU8> images;
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string which = "image " + std::to_string(i) + ": ";
    auto bytes = data_uri_bytes(urls[i]);
    if (!bytes.ok()) return make_error(bytes.error().code, which + bytes.error().message);
    auto img = vision::decode_image(bytes->data(), bytes->size());
    if (!img.ok()) return make_error(img.error().code, which + img.error().message);
    images.push_back(std::move(*img));
  }
  return vision::build_image_prompt(model, v.model, text, images, *v.rows, v.encode);
}

#else

struct ServerVision {};

Result<std::shared_ptr<ServerVision>> load_server_vision(const Model&, const std::string&, bool) {
  return make_error(Status::unsupported, "this build has no vision layer (built without Debian's libstb-dev)");
}

std::shared_ptr<ImageRows> server_image_rows(const ServerVision&) { return nullptr; }

int server_vision_tile_rows(const ServerVision&) { return 0; }

Result<std::vector<int32_t>> image_prompt_ids(const ServerVision&, const Model&, const std::string&,
                                              const std::vector<std::string>&) {
  return make_error(Status::unsupported, "this build has no vision layer");
}

#endif

}  // namespace pllm::server
