#include "vision/image_prompt.h"

#include "base/hash.h"
#include "vision/layout.h"
#include "vision/preprocess.h"

namespace pllm::vision {

std::vector<int32_t> image_row_ids(const ImageU8& img, uint64_t vision_identity, ActMode act, int tile, int n) {
  Hasher h(0x696d616765ull);  // "image"
  h.update_u64(vision_identity);
  h.update_u64(uint64_t(act));
  h.update_u64(uint64_t(img.width));
  h.update_u64(uint64_t(img.height));
  h.update(img.rgb.data(), img.rgb.size());
  h.update_u64(uint64_t(tile));
  const uint64_t base = h.digest();
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    uint64_t z = base + uint64_t(i) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    ids[size_t(i)] = -1 - int32_t((z >> 33) & 0x3fffffff);  // in [kMinImageRowId, -1]
  }
  return ids;
}

Result<void> check_pairing(const Model& text, const VisionModel& vision) {
  const int n_embd = text.config().n_embd;
  if (vision.hp.n_out != n_embd)
    return make_error(Status::invalid_argument, std::string("the mmproj's ") + projector_name(vision.hp.projector) +
                                                    " projector gives rows of " + std::to_string(vision.hp.n_out) +
                                                    ", the text model's embeddings are " + std::to_string(n_embd) +
                                                    " wide: not a pair");
  const std::vector<const char*> need =
      vision.hp.projector == Projector::gemma3
          ? std::vector<const char*>{"<start_of_image>", "<end_of_image>"}
          : std::vector<const char*>{"<fake_token_around_image>", "<global-img>"};
  for (const char* t : need)
    if (text.tokenizer().find_token(t) < 0)
      return make_error(Status::invalid_argument, std::string("the text model's vocabulary has no ") + t + " token, which the " +
                                                      projector_name(vision.hp.projector) + " projector's images need");
  return {};
}

namespace {

Result<void> add_text(const Tokenizer& tok, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return {};
  PLLM_ASSIGN(std::vector<int32_t> ids, tok.encode(text, false, true));
  out.insert(out.end(), ids.begin(), ids.end());
  return {};
}

}  // namespace

Result<std::vector<int32_t>> build_image_prompt(const Model& text, std::shared_ptr<const VisionModel> vision,
                                       std::string_view prompt, std::span<const ImageU8> images, ImageRows& rows,
                                       const EncodeOptions& opt, bool add_special) {
  if (!vision) return make_error(Status::invalid_argument, "no vision model");
  PLLM_TRY(check_pairing(text, *vision));
  std::vector<std::string_view> parts;  // the text around the markers
  for (size_t at = 0;;) {
    const size_t m = prompt.find(kImageMarker, at);
    parts.push_back(prompt.substr(at, m == std::string_view::npos ? std::string_view::npos : m - at));
    if (m == std::string_view::npos) break;
    at = m + kImageMarker.size();
  }
  if (parts.size() - 1 != images.size())
    return make_error(Status::invalid_argument, "the prompt has " + std::to_string(parts.size() - 1) + " image marker" +
                                                    (parts.size() == 2 ? "" : "s") + " (" + std::string(kImageMarker) +
                                                    ") for " + std::to_string(images.size()) + " image" +
                                                    (images.size() == 1 ? "" : "s"));
  const Tokenizer& tok = text.tokenizer();
  const int per_tile = vision->hp.tokens_per_image();
  std::vector<int32_t> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    PLLM_TRY(add_text(tok, parts[i], out));
    if (i == images.size()) break;
    PLLM_ASSIGN(Preprocessed pre, preprocess_image(images[i], vision->hp));
    for (const LayoutPiece& lp : image_layout(vision->hp, pre)) {
      if (lp.image < 0) {
        PLLM_TRY(add_text(tok, lp.text, out));
        continue;
      }
      auto tile = std::make_shared<ImageTile>();
      tile->ids = image_row_ids(images[i], vision->identity, opt.act, lp.image, per_tile);
      tile->bidirectional = vision->hp.projector == Projector::gemma3;
      auto img = std::make_shared<const ImageF32>(std::move(pre.images[size_t(lp.image)]));
      tile->encode = [vision, img, opt](ThreadPool& pool) { return encode_image(*vision, *img, pool, opt); };
      out.insert(out.end(), tile->ids.begin(), tile->ids.end());
      PLLM_TRY(rows.add(std::move(tile)));
    }
  }
  // BOS first, as mtmd_tokenize adds it; not twice when the text begins with it.
  if (add_special && tok.add_bos() && tok.bos() >= 0 && (out.empty() || out[0] != tok.bos()))
    out.insert(out.begin(), tok.bos());
  return out;
}

}  // namespace pllm::vision
