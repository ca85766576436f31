// GGUF parsing. Every count, length, offset and size read from the file is checked
// against the bytes that remain and combined with checked arithmetic, so a hostile
// file yields an error naming the file and field, never a crash or a huge allocation.
#include "gguf/gguf.h"

#include <cstring>
#include <string>

#include "base/checked.h"
#include "quant/types.h"

namespace pllm {
namespace {

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxKeyLen = 1u << 16;

uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    default: return 0;  // string/array: variable
  }
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::f64); }

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Error fail(const std::string& what) const {
    return make_error(Status::bad_format,
                      path_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  template <class T>
  Result<T> read(const char* field) {
    if (remaining() < sizeof(T)) return fail(std::string("truncated file while reading ") + field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string_view> read_string(const std::string& field) {
    PLLM_ASSIGN(uint64_t len, read<uint64_t>(field.c_str()));
    if (len > remaining())
      return fail(field + ": string length " + std::to_string(len) + " runs past the end of the file");
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

Result<GgufValue> read_scalar(Cursor& c, GgufType t, const std::string& field) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::u8: { PLLM_ASSIGN(auto x, c.read<uint8_t>(field.c_str())); v.scalar = uint64_t(x); break; }
    case GgufType::i8: { PLLM_ASSIGN(auto x, c.read<int8_t>(field.c_str())); v.scalar = int64_t(x); break; }
    case GgufType::u16: { PLLM_ASSIGN(auto x, c.read<uint16_t>(field.c_str())); v.scalar = uint64_t(x); break; }
    case GgufType::i16: { PLLM_ASSIGN(auto x, c.read<int16_t>(field.c_str())); v.scalar = int64_t(x); break; }
    case GgufType::u32: { PLLM_ASSIGN(auto x, c.read<uint32_t>(field.c_str())); v.scalar = uint64_t(x); break; }
    case GgufType::i32: { PLLM_ASSIGN(auto x, c.read<int32_t>(field.c_str())); v.scalar = int64_t(x); break; }
    case GgufType::u64: { PLLM_ASSIGN(auto x, c.read<uint64_t>(field.c_str())); v.scalar = x; break; }
    case GgufType::i64: { PLLM_ASSIGN(auto x, c.read<int64_t>(field.c_str())); v.scalar = x; break; }
    case GgufType::f32: { PLLM_ASSIGN(auto x, c.read<float>(field.c_str())); v.scalar = double(x); break; }
    case GgufType::f64: { PLLM_ASSIGN(auto x, c.read<double>(field.c_str())); v.scalar = x; break; }
    case GgufType::boolean: {
      PLLM_ASSIGN(auto x, c.read<uint8_t>(field.c_str()));
      if (x > 1) return c.fail(field + ": boolean value " + std::to_string(x) + " is not 0 or 1");
      v.scalar = x != 0;
      break;
    }
    case GgufType::string: { PLLM_ASSIGN(auto s, c.read_string(field)); v.scalar = s; break; }
    default: return c.fail(field + ": unexpected value type " + std::to_string(uint32_t(t)));
  }
  return v;
}

Result<GgufValue> read_value(Cursor& c, uint32_t raw_type, const std::string& key) {
  if (!known_type(raw_type))
    return c.fail("metadata '" + key + "': unknown value type " + std::to_string(raw_type));
  const auto t = static_cast<GgufType>(raw_type);
  if (t != GgufType::array) return read_scalar(c, t, "metadata '" + key + "'");

  PLLM_ASSIGN(uint32_t raw_elem, c.read<uint32_t>("array element type"));
  if (!known_type(raw_elem))
    return c.fail("metadata '" + key + "': unknown array element type " + std::to_string(raw_elem));
  const auto et = static_cast<GgufType>(raw_elem);
  if (et == GgufType::array) return c.fail("metadata '" + key + "': nested arrays are not supported");
  PLLM_ASSIGN(uint64_t count, c.read<uint64_t>("array length"));
  // Each element needs at least its fixed size (8 bytes for a string's length).
  const uint64_t min_elem = et == GgufType::string ? 8 : scalar_size(et);
  if (count > c.remaining() / min_elem)
    return c.fail("metadata '" + key + "': array length " + std::to_string(count) +
                  " runs past the end of the file");
  GgufValue v;
  v.type = GgufType::array;
  v.elem_type = et;
  v.items.reserve(count);
  const std::string field = "metadata '" + key + "' element";
  for (uint64_t i = 0; i < count; ++i) {
    PLLM_ASSIGN(GgufValue item, read_scalar(c, et, field));
    v.items.push_back(std::move(item));
  }
  return v;
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::u16: case GgufType::i16:
    case GgufType::u32: case GgufType::i32: case GgufType::u64: case GgufType::i64: return true;
    default: return false;
  }
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

Result<std::shared_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  PLLM_ASSIGN(auto mapped, MappedFile::open(path));
  return parse(std::move(mapped));
}

Result<std::shared_ptr<GgufFile>> GgufFile::parse(std::shared_ptr<MappedFile> file) {
  auto g = std::shared_ptr<GgufFile>(new GgufFile());
  g->file_ = std::move(file);
  const std::string& path = g->file_->path();
  Cursor c(g->file_->data(), g->file_->size(), path);

  PLLM_ASSIGN(uint32_t magic, c.read<uint32_t>("magic"));
  if (magic != 0x46554747u)  // "GGUF" little-endian
    return make_error(Status::bad_format, path + ": not a GGUF file (bad magic)");
  PLLM_ASSIGN(g->version_, c.read<uint32_t>("version"));
  if (g->version_ != 2 && g->version_ != 3)
    return make_error(Status::unsupported,
                      path + ": GGUF version " + std::to_string(g->version_) + " is not supported (2 or 3)");
  PLLM_ASSIGN(uint64_t n_tensors, c.read<uint64_t>("tensor_count"));
  PLLM_ASSIGN(uint64_t n_kv, c.read<uint64_t>("kv_count"));
  // A KV pair takes at least 8 (key len) + 4 (type) + 1 bytes; a tensor info at least 8+4+8+4+8.
  if (n_kv > c.remaining() / 13)
    return c.fail("kv_count " + std::to_string(n_kv) + " is larger than the file can hold");
  if (n_tensors > c.remaining() / 32)
    return c.fail("tensor_count " + std::to_string(n_tensors) + " is larger than the file can hold");

  for (uint64_t i = 0; i < n_kv; ++i) {
    PLLM_ASSIGN(std::string_view key, c.read_string("metadata key"));
    if (key.empty() || key.size() > kMaxKeyLen) return c.fail("metadata key has invalid length");
    PLLM_ASSIGN(uint32_t raw_type, c.read<uint32_t>("metadata value type"));
    const std::string k(key);
    PLLM_ASSIGN(GgufValue v, read_value(c, raw_type, k));
    if (g->kv_.count(k)) return c.fail("duplicate metadata key '" + k + "'");
    g->kv_.emplace(k, std::move(v));
  }

  if (const GgufValue* a = g->find("general.alignment")) {
    if (!is_integer(a->type))
      return make_error(Status::bad_format, path + ": general.alignment must be an integer");
    uint64_t al = 0;
    if (auto* u = std::get_if<uint64_t>(&a->scalar)) al = *u;
    else if (auto* s = std::get_if<int64_t>(&a->scalar)) al = *s < 0 ? 0 : uint64_t(*s);
    if (!is_pow2(al) || al > (1u << 20))
      return make_error(Status::bad_format,
                        path + ": general.alignment " + std::to_string(al) + " is not a power of two");
    g->alignment_ = al;
  }

  g->tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    PLLM_ASSIGN(std::string_view name, c.read_string("tensor name"));
    if (name.empty() || name.size() > kMaxKeyLen) return c.fail("tensor name has invalid length");
    t.name = std::string(name);
    const std::string field = "tensor '" + t.name + "'";
    PLLM_ASSIGN(uint32_t n_dims, c.read<uint32_t>("tensor n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims)
      return c.fail(field + ": n_dims " + std::to_string(n_dims) + " is not in 1..4");
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      PLLM_ASSIGN(uint64_t dim, c.read<uint64_t>("tensor dimension"));
      if (dim == 0) return c.fail(field + ": dimension " + std::to_string(d) + " is zero");
      auto p = checked_mul(n_el, dim);
      if (!p || *p > (uint64_t(1) << 62)) return c.fail(field + ": element count overflows");
      n_el = *p;
      t.dims.push_back(dim);
    }
    t.n_elements = n_el;
    PLLM_ASSIGN(t.type, c.read<uint32_t>("tensor type"));
    auto tr = type_traits(t.type);
    if (!tr) return c.fail(field + ": unknown tensor type id " + std::to_string(t.type));
    auto rb = row_bytes(t.type, t.dims[0]);
    if (!rb)
      return c.fail(field + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                    tr->name + " block size");
    auto nb = checked_mul(*rb, n_el / t.dims[0]);
    if (!nb) return c.fail(field + ": byte size overflows");
    t.n_bytes = *nb;
    PLLM_ASSIGN(t.offset, c.read<uint64_t>("tensor offset"));
    if (t.offset % g->alignment_ != 0)
      return c.fail(field + ": data offset " + std::to_string(t.offset) + " is not aligned to " +
                    std::to_string(g->alignment_));
    if (g->tensor_index_.count(t.name)) return c.fail("duplicate tensor name '" + t.name + "'");
    g->tensor_index_.emplace(t.name, g->tensors_.size());
    g->tensors_.push_back(std::move(t));
  }

  const auto data_start = checked_align_up(c.pos(), g->alignment_);
  const uint64_t size = g->file_->size();
  if (!data_start || (*data_start > size && !g->tensors_.empty()))
    return make_error(Status::bad_format, path + ": data section starts past the end of the file");
  for (auto& t : g->tensors_) {
    auto begin = checked_add(*data_start, t.offset);
    auto end = begin ? checked_add(*begin, t.n_bytes) : std::nullopt;
    if (!end || *end > size)
      return make_error(Status::bad_format, path + ": tensor '" + t.name + "': data (offset " +
                                                std::to_string(t.offset) + ", " + std::to_string(t.n_bytes) +
                                                " bytes) runs past the end of the file");
    t.data = g->file_->data() + *begin;
  }
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---- typed getters ---------------------------------------------------------

namespace {

Error missing(const GgufFile& f, std::string_view key) {
  return make_error(Status::bad_format, f.path() + ": missing metadata key '" + std::string(key) + "'");
}
Error wrong(const GgufFile& f, std::string_view key, const char* want, const GgufValue& v) {
  std::string got = gguf_type_name(v.type);
  if (v.type == GgufType::array) got += std::string(" of ") + gguf_type_name(v.elem_type);
  return make_error(Status::bad_format, f.path() + ": metadata '" + std::string(key) + "' should be " +
                                            want + " but is " + got);
}

std::optional<uint64_t> as_u64(const GgufValue& v) {
  if (auto* u = std::get_if<uint64_t>(&v.scalar)) return *u;
  if (auto* s = std::get_if<int64_t>(&v.scalar); s && *s >= 0) return uint64_t(*s);
  return std::nullopt;
}
std::optional<double> as_f64(const GgufValue& v) {
  if (auto* d = std::get_if<double>(&v.scalar)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v.scalar)) return double(*u);
  if (auto* s = std::get_if<int64_t>(&v.scalar)) return double(*s);
  return std::nullopt;
}

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::string) return wrong(*this, key, "a string", *v);
  return std::string(std::get<std::string_view>(v->scalar));
}

Result<uint64_t> GgufFile::get_u64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  auto u = is_integer(v->type) ? as_u64(*v) : std::nullopt;
  if (!u) return wrong(*this, key, "a non-negative integer", *v);
  return *u;
}

Result<double> GgufFile::get_f64(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type == GgufType::array || v->type == GgufType::string || v->type == GgufType::boolean)
    return wrong(*this, key, "a number", *v);
  return *as_f64(*v);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::boolean) return wrong(*this, key, "a bool", *v);
  return std::get<bool>(v->scalar);
}

Result<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::array || v->elem_type != GgufType::string)
    return wrong(*this, key, "an array of strings", *v);
  std::vector<std::string_view> out;
  out.reserve(v->items.size());
  for (const auto& it : v->items) out.push_back(std::get<std::string_view>(it.scalar));
  return out;
}

Result<std::vector<double>> GgufFile::get_f64_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::array || !(is_integer(v->elem_type) || v->elem_type == GgufType::f32 ||
                                      v->elem_type == GgufType::f64))
    return wrong(*this, key, "a numeric array", *v);
  std::vector<double> out;
  out.reserve(v->items.size());
  for (const auto& it : v->items) out.push_back(*as_f64(it));
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_i64_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return missing(*this, key);
  if (v->type != GgufType::array || !is_integer(v->elem_type))
    return wrong(*this, key, "an integer array", *v);
  std::vector<int64_t> out;
  out.reserve(v->items.size());
  for (const auto& it : v->items) {
    if (auto* s = std::get_if<int64_t>(&it.scalar)) out.push_back(*s);
    else {
      const uint64_t u = std::get<uint64_t>(it.scalar);
      if (u > uint64_t(INT64_MAX)) return wrong(*this, key, "an integer array within int64", *v);
      out.push_back(int64_t(u));
    }
  }
  return out;
}

Result<uint64_t> GgufFile::get_u64_or(std::string_view key, uint64_t dflt) const {
  return find(key) ? get_u64(key) : Result<uint64_t>(dflt);
}
Result<double> GgufFile::get_f64_or(std::string_view key, double dflt) const {
  return find(key) ? get_f64(key) : Result<double>(dflt);
}
Result<std::string> GgufFile::get_string_or(std::string_view key, std::string dflt) const {
  return find(key) ? get_string(key) : Result<std::string>(std::move(dflt));
}

}  // namespace pllm
