#include "vision/image.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace {
// The largest legitimate buffer stb needs under our caps: a 16-bit RGBA image of kMaxImagePixels
// (512 MiB) or its inflated rows; twice that leaves room without allowing a runaway.
constexpr size_t kMaxDecodeAllocation = size_t(1) << 30;
void* pllm_stbi_capped_malloc(size_t n) { return n > kMaxDecodeAllocation ? nullptr : std::malloc(n); }
void* pllm_stbi_capped_realloc(void* p, size_t n) {
  return n > kMaxDecodeAllocation ? nullptr : std::realloc(p, n);
}
}  // namespace

// Debian's libstb-dev: stb_image compiled into this one file, private to it (STB_IMAGE_STATIC),
// limited to the formats we take, with its own size cap as a second line behind ours.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 16384
// Every stb allocation goes through a cap: a zlib stream inflating far past what the header
// declared must fail as out-of-memory inside stb rather than ask for gigabytes.
#define STBI_MALLOC(sz) pllm_stbi_capped_malloc(sz)
#define STBI_REALLOC(p, newsz) pllm_stbi_capped_realloc(p, newsz)
#define STBI_FREE(p) std::free(p)
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace pllm::vision {

static_assert(STBI_MAX_DIMENSIONS == kMaxImageSide, "stb's cap and ours must agree");

namespace {

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// stb trusts a PNG chunk's declared length and grows its compressed-data buffer to it before
// reading: a 1 GiB IDAT claim in a 100-byte file is a 2 GiB allocation. Walk the chunks first;
// each must lie inside the bytes we have (length, type, data, CRC).
bool png_chunks_fit(const uint8_t* data, size_t n, std::string* why) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n < 8 || std::memcmp(data, kSignature, 8) != 0) return true;  // not a PNG
  size_t at = 8;
  while (at + 8 <= n) {
    const uint64_t len = be32(data + at);
    const std::string type(reinterpret_cast<const char*>(data + at + 4), 4);
    if (len > 0x7fffffffu || at + 12 + len > n) {
      *why = "image: PNG chunk '" + type + "' at byte " + std::to_string(at) + " declares " + std::to_string(len) +
             " bytes but only " + std::to_string(n - std::min(n, at + 12)) + " follow (truncated or corrupt)";
      return false;
    }
    if (type == "IEND") return true;
    at += 12 + len;
  }
  *why = "image: PNG ends before its IEND chunk (truncated)";
  return false;
}

}  // namespace

Result<ImageU8> decode_image(const uint8_t* data, size_t n) {
  if (data == nullptr || n == 0) return make_error(Status::bad_format, "image: empty input");
  if (n > kMaxImageFileBytes)
    return make_error(Status::out_of_range, "image: file of " + std::to_string(n) + " bytes is larger than the " +
                                                std::to_string(kMaxImageFileBytes >> 20) + " MiB limit");
  int w = 0, h = 0, comp = 0;
  // The header alone first: refuse huge dimensions before any pixel memory is allocated.
  if (!stbi_info_from_memory(data, int(n), &w, &h, &comp)) {
    const char* why = stbi_failure_reason();
    return make_error(Status::bad_format,
                      std::string("image: not a readable PNG, JPEG or BMP (") + (why ? why : "unknown") + ")");
  }
  if (w <= 0 || h <= 0 || w > kMaxImageSide || h > kMaxImageSide || int64_t(w) * h > kMaxImagePixels)
    return make_error(Status::out_of_range, "image: " + std::to_string(w) + "x" + std::to_string(h) +
                                                " is larger than the limit (" + std::to_string(kMaxImageSide) +
                                                " per side, " + std::to_string(kMaxImagePixels >> 20) + " Mpixel)");
  std::string why_not;
  if (!png_chunks_fit(data, n, &why_not)) return make_error(Status::bad_format, why_not);
  int w2 = 0, h2 = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(data, int(n), &w2, &h2, &comp, 3),
                                               stbi_image_free);
  if (!px) {
    const char* why = stbi_failure_reason();
    return make_error(Status::bad_format,
                      std::string("image: decoding failed (") + (why ? why : "unknown") + "; truncated or corrupt?)");
  }
  if (w2 != w || h2 != h) return make_error(Status::bad_format, "image: header and pixel data disagree on the size");
  ImageU8 img;
  img.width = w;
  img.height = h;
  img.rgb.assign(px.get(), px.get() + size_t(w) * size_t(h) * 3);
  return img;
}

Result<ImageU8> load_image_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) return make_error(Status::io_error, path + ": cannot open image");
  std::vector<uint8_t> bytes;
  uint8_t buf[65536];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
    bytes.insert(bytes.end(), buf, buf + got);
    if (bytes.size() > kMaxImageFileBytes)
      return make_error(Status::out_of_range, path + ": image file is larger than the " +
                                                  std::to_string(kMaxImageFileBytes >> 20) + " MiB limit");
  }
  if (std::ferror(f.get())) return make_error(Status::io_error, path + ": read error");
  auto r = decode_image(bytes.data(), bytes.size());
  if (!r.ok()) return make_error(r.error().code, path + ": " + r.error().message);
  return r;
}

}  // namespace pllm::vision
