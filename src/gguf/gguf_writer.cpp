// GGUF v3 writer (see gguf_writer.h). Values are serialised when they are set, so the
// writer holds plain bytes and write() only lays out the header and the data section.
#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/checked.h"
#include "quant/types.h"

namespace pllm {
namespace {

class Bytes {
 public:
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void str(std::string_view s) {
    pod<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> out;
};

template <class T>
std::vector<uint8_t> scalar_bytes(T v) {
  Bytes b;
  b.pod(v);
  return std::move(b.out);
}

template <class T>
std::vector<uint8_t> array_bytes(GgufType elem, std::span<const T> v) {
  Bytes b;
  b.pod<uint32_t>(uint32_t(elem));
  b.pod<uint64_t>(v.size());
  for (const T& x : v) b.pod(x);
  return std::move(b.out);
}

// One scalar read by GgufFile, in its own type's width.
void put_scalar(Bytes& b, GgufType t, const GgufValue& v) {
  auto u = [&]() -> uint64_t {
    if (auto* x = std::get_if<uint64_t>(&v.scalar)) return *x;
    if (auto* x = std::get_if<int64_t>(&v.scalar)) return uint64_t(*x);
    return 0;
  };
  auto f = [&]() -> double {
    auto* x = std::get_if<double>(&v.scalar);
    return x ? *x : 0.0;
  };
  switch (t) {
    case GgufType::u8: b.pod<uint8_t>(uint8_t(u())); break;
    case GgufType::i8: b.pod<int8_t>(int8_t(u())); break;
    case GgufType::u16: b.pod<uint16_t>(uint16_t(u())); break;
    case GgufType::i16: b.pod<int16_t>(int16_t(u())); break;
    case GgufType::u32: b.pod<uint32_t>(uint32_t(u())); break;
    case GgufType::i32: b.pod<int32_t>(int32_t(u())); break;
    case GgufType::u64: b.pod<uint64_t>(u()); break;
    case GgufType::i64: b.pod<int64_t>(int64_t(u())); break;
    case GgufType::f32: b.pod<float>(float(f())); break;
    case GgufType::f64: b.pod<double>(f()); break;
    case GgufType::boolean: {
      auto* x = std::get_if<bool>(&v.scalar);
      b.pod<uint8_t>(x && *x ? 1 : 0);
      break;
    }
    case GgufType::string: {
      auto* s = std::get_if<std::string_view>(&v.scalar);
      b.str(s ? *s : std::string_view());
      break;
    }
    case GgufType::array: break;  // the reader never nests arrays
  }
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

long GgufWriter::find(std::string_view key) const {
  for (size_t i = 0; i < kvs_.size(); ++i)
    if (kvs_[i].key == key) return long(i);
  return -1;
}

void GgufWriter::put(std::string_view key, GgufType type, std::vector<uint8_t> payload) {
  const long i = find(key);
  if (i >= 0) {
    kvs_[size_t(i)].type = type;
    kvs_[size_t(i)].payload = std::move(payload);
  } else {
    kvs_.push_back(Kv{std::string(key), type, std::move(payload)});
  }
}

void GgufWriter::copy_metadata(const GgufFile& f) {
  // metadata() is a map (sorted by key); the file's own order is not kept by the reader,
  // so keys are written sorted. Readers look keys up by name, so order carries no meaning.
  for (const auto& [key, v] : f.metadata()) set_value(key, v);
}

void GgufWriter::set_value(std::string_view key, const GgufValue& v) {
  Bytes b;
  if (v.type == GgufType::array) {
    b.pod<uint32_t>(uint32_t(v.elem_type));
    b.pod<uint64_t>(v.items.size());
    for (const GgufValue& it : v.items) put_scalar(b, v.elem_type, it);
  } else {
    put_scalar(b, v.type, v);
  }
  put(key, v.type, std::move(b.out));
}

void GgufWriter::set_u8(std::string_view k, uint8_t v) { put(k, GgufType::u8, scalar_bytes(v)); }
void GgufWriter::set_u32(std::string_view k, uint32_t v) { put(k, GgufType::u32, scalar_bytes(v)); }
void GgufWriter::set_i32(std::string_view k, int32_t v) { put(k, GgufType::i32, scalar_bytes(v)); }
void GgufWriter::set_u64(std::string_view k, uint64_t v) { put(k, GgufType::u64, scalar_bytes(v)); }
void GgufWriter::set_i64(std::string_view k, int64_t v) { put(k, GgufType::i64, scalar_bytes(v)); }
void GgufWriter::set_f32(std::string_view k, float v) { put(k, GgufType::f32, scalar_bytes(v)); }
void GgufWriter::set_f64(std::string_view k, double v) { put(k, GgufType::f64, scalar_bytes(v)); }
void GgufWriter::set_bool(std::string_view k, bool v) { put(k, GgufType::boolean, scalar_bytes<uint8_t>(v ? 1 : 0)); }
void GgufWriter::set_string(std::string_view k, std::string_view v) {
  Bytes b;
  b.str(v);
  put(k, GgufType::string, std::move(b.out));
}
void GgufWriter::set_array_u32(std::string_view k, std::span<const uint32_t> v) {
  put(k, GgufType::array, array_bytes(GgufType::u32, v));
}
void GgufWriter::set_array_i32(std::string_view k, std::span<const int32_t> v) {
  put(k, GgufType::array, array_bytes(GgufType::i32, v));
}
void GgufWriter::set_array_u64(std::string_view k, std::span<const uint64_t> v) {
  put(k, GgufType::array, array_bytes(GgufType::u64, v));
}
void GgufWriter::set_array_f32(std::string_view k, std::span<const float> v) {
  put(k, GgufType::array, array_bytes(GgufType::f32, v));
}
void GgufWriter::set_array_string(std::string_view k, std::span<const std::string> v) {
  Bytes b;
  b.pod<uint32_t>(uint32_t(GgufType::string));
  b.pod<uint64_t>(v.size());
  for (const std::string& s : v) b.str(s);
  put(k, GgufType::array, std::move(b.out));
}

bool GgufWriter::remove(std::string_view key) {
  const long i = find(key);
  if (i < 0) return false;
  kvs_.erase(kvs_.begin() + i);
  return true;
}

Result<void> GgufWriter::add_tensor(std::string name, uint32_t ggml_type, std::vector<uint64_t> dims,
                                    std::vector<uint8_t> bytes) {
  const std::string what = "tensor '" + name + "'";
  if (name.empty() || name.size() > kMaxTensorName)
    return make_error(Status::invalid_argument,
                      what + ": name must be 1.." + std::to_string(kMaxTensorName) + " bytes long");
  for (const Tensor& t : tensors_)
    if (t.name == name) return make_error(Status::invalid_argument, what + " is added twice");
  const auto tr = type_traits(ggml_type);
  if (!tr) return make_error(Status::invalid_argument, what + ": unknown ggml type " + std::to_string(ggml_type));
  if (dims.empty() || dims.size() > 4)
    return make_error(Status::invalid_argument, what + ": needs 1 to 4 dimensions");
  uint64_t rows = 1;
  for (size_t d = 1; d < dims.size(); ++d) {
    auto p = dims[d] ? checked_mul(rows, dims[d]) : std::nullopt;
    if (!p) return make_error(Status::invalid_argument, what + ": a dimension is zero or the element count overflows");
    rows = *p;
  }
  if (dims[0] == 0) return make_error(Status::invalid_argument, what + ": dimension 0 is zero");
  const auto rb = row_bytes(ggml_type, dims[0]);
  if (!rb)
    return make_error(Status::invalid_argument, what + ": row length " + std::to_string(dims[0]) +
                                                    " is not a multiple of the " + tr->name + " block (" +
                                                    std::to_string(tr->block_elems) + ")");
  const auto want = checked_mul(*rb, rows);
  if (!want || *want != bytes.size())
    return make_error(Status::invalid_argument, what + ": " + std::to_string(bytes.size()) + " bytes of data, " +
                                                    tr->name + " of this shape needs " +
                                                    (want ? std::to_string(*want) : std::string("too many")));
  tensors_.push_back(Tensor{std::move(name), ggml_type, std::move(dims), std::move(bytes)});
  return {};
}

uint64_t GgufWriter::tensor_bytes() const {
  uint64_t s = 0;
  for (const Tensor& t : tensors_) s += t.data.size();
  return s;
}

Result<uint64_t> GgufWriter::alignment() const {
  const long i = find("general.alignment");
  if (i < 0) return uint64_t(32);
  const Kv& kv = kvs_[size_t(i)];
  uint64_t al = 0;
  switch (kv.type) {
    case GgufType::u8: case GgufType::u16: case GgufType::u32: case GgufType::u64:
    case GgufType::i8: case GgufType::i16: case GgufType::i32: case GgufType::i64: {
      std::memcpy(&al, kv.payload.data(), std::min(kv.payload.size(), sizeof al));
      const size_t width = kv.payload.size();
      if (width < 8) al &= (uint64_t(1) << (8 * width)) - 1;
      break;
    }
    default:
      return make_error(Status::invalid_argument, "general.alignment must be an integer");
  }
  if (!is_pow2(al) || al > (1u << 20))
    return make_error(Status::invalid_argument,
                      "general.alignment " + std::to_string(al) + " is not a power of two up to 1 MiB");
  return al;
}

Result<void> GgufWriter::write(const std::string& path) const {
  PLLM_ASSIGN(const uint64_t align, alignment());
  // The rename would replace whatever is there: only ever a regular file (never a device
  // such as /dev/null, a directory or a socket).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return make_error(Status::invalid_argument, "cannot write " + path + ": it exists and is not a regular file");
  Bytes h;
  h.pod<uint32_t>(0x46554747u);  // "GGUF"
  h.pod<uint32_t>(3);
  h.pod<uint64_t>(tensors_.size());
  h.pod<uint64_t>(kvs_.size());
  for (const Kv& kv : kvs_) {
    h.str(kv.key);
    h.pod<uint32_t>(uint32_t(kv.type));
    h.out.insert(h.out.end(), kv.payload.begin(), kv.payload.end());
  }
  std::vector<uint64_t> offsets;
  uint64_t off = 0;
  for (const Tensor& t : tensors_) {
    h.str(t.name);
    h.pod<uint32_t>(uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) h.pod<uint64_t>(d);
    h.pod<uint32_t>(t.type);
    auto a = checked_align_up(off, align);
    if (!a) return make_error(Status::invalid_argument, "tensor data offsets overflow");
    h.pod<uint64_t>(*a);
    offsets.push_back(*a);
    off = *a + t.data.size();
  }
  while (h.out.size() % align) h.out.push_back(0);

  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(Status::io_error, "cannot create " + tmp + ": " + errno_text());
  auto fail = [&](const std::string& why) -> Error {
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error(Status::io_error, "cannot write " + path + ": " + why);
  };
  auto put = [&](const uint8_t* p, size_t n) -> bool {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= size_t(w);
    }
    return true;
  };
  if (!put(h.out.data(), h.out.size())) return fail(errno_text());
  static const uint8_t zeros[64] = {};
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    while (pos < offsets[i]) {
      const size_t n = size_t(std::min<uint64_t>(sizeof zeros, offsets[i] - pos));
      if (!put(zeros, n)) return fail(errno_text());
      pos += n;
    }
    if (!put(tensors_[i].data.data(), tensors_[i].data.size())) return fail(errno_text());
    pos += tensors_[i].data.size();
  }
  if (::fsync(fd) != 0) return fail(errno_text());
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return make_error(Status::io_error, "cannot write " + path + ": " + errno_text());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    return make_error(Status::io_error, "cannot rename " + tmp + " to " + path + ": " + why);
  }
  return {};
}

}  // namespace pllm
