// Images in chat requests: OpenAI's image_url content parts, as data: URIs (base64 PNG, JPEG or
// BMP). The server fetches nothing: a remote URL is the request's error. With a vision encoder
// (serve --mmproj) the images go into the prompt's tokens (vision/image_prompt.h); the image
// rows are shared by every request, so a photo sent again is not encoded again.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model.h"
#include "runtime/image_rows.h"

namespace pllm::server {

struct ServerVision;  // the mmproj, its encode options and the shared image rows

// Loads an mmproj for model (errors name the file); unsupported where the build has no vision.
Result<std::shared_ptr<ServerVision>> load_server_vision(const Model& model, const std::string& mmproj, bool int8);
// The image rows the server's sessions share.
std::shared_ptr<ImageRows> server_image_rows(const ServerVision& v);
// Rows of one encoded tile (a session's batch must hold them).
int server_vision_tile_rows(const ServerVision& v);

// The bytes of a data: URI ("data:[<type>][;base64],<data>"); a remote URL (http, https, ...)
// or malformed base64 is an invalid_argument saying so.
Result<std::vector<uint8_t>> data_uri_bytes(const std::string& url);

// The prompt's tokens with the images (one kImageMarker each in text), image rows negative.
// invalid_argument / bad_format / out_of_range: the request's fault (a 400).
Result<std::vector<int32_t>> image_prompt_ids(const ServerVision& v, const Model& model, const std::string& text,
                                              const std::vector<std::string>& urls);

}  // namespace pllm::server
