#include "vision/layout.h"

namespace pllm::vision {

namespace {

void add_text(std::vector<LayoutPiece>& out, const std::string& t) {
  if (t.empty()) return;
  // Adjacent text pieces merge: the caller tokenizes each piece once.
  if (!out.empty() && out.back().image < 0) out.back().text += t;
  else out.push_back(LayoutPiece{t, -1});
}

}  // namespace

std::vector<LayoutPiece> image_layout(const VisionHparams& hp, const Preprocessed& pre) {
  std::vector<LayoutPiece> out;
  if (hp.projector == Projector::gemma3) {
    add_text(out, "<start_of_image>");
    for (int i = 0; i < int(pre.images.size()); ++i) out.push_back(LayoutPiece{{}, i});
    add_text(out, "<end_of_image>");
    return out;
  }
  // idefics3: tiles first (mtmd's ov_img_first is false for it), then the overview.
  for (int y = 0; y < pre.grid_y; ++y) {
    for (int x = 0; x < pre.grid_x; ++x) {
      add_text(out, "<fake_token_around_image><row_" + std::to_string(y + 1) + "_col_" + std::to_string(x + 1) + ">");
      out.push_back(LayoutPiece{{}, y * pre.grid_x + x});
    }
    if (y != pre.grid_y - 1) add_text(out, "\n");
  }
  if (pre.has_overview) {
    add_text(out, "\n\n<fake_token_around_image><global-img>");
    out.push_back(LayoutPiece{{}, int(pre.images.size()) - 1});
    add_text(out, "<fake_token_around_image>");
  }
  return out;
}

}  // namespace pllm::vision
