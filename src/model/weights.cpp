#include "model/weights.h"

#include "kernels/kernels.h"
#include "quant/panel.h"

namespace pllm {

namespace {
std::string shape_str(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}
}  // namespace

Result<Matrix> get_matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const TensorInfo* t = f.tensor(name);
  if (!t) return make_error(Status::bad_format, f.path() + ": missing tensor '" + name + "'");
  if (t->dims.size() != 2 || t->dims[0] != uint64_t(cols) || t->dims[1] != uint64_t(rows))
    return make_error(Status::bad_format, f.path() + ": tensor '" + name + "' has shape " + shape_str(*t) +
                                              ", expected [" + std::to_string(cols) + ", " +
                                              std::to_string(rows) + "]");
  auto tr = type_traits(t->type);
  if (!tr || !tr->supported || !kernels().for_type(static_cast<TensorType>(t->type)).available)
    return make_error(Status::unsupported, f.path() + ": tensor '" + name + "' has type " +
                                               (tr ? tr->name : std::to_string(t->type)) +
                                               ", which is not supported");
  Matrix m;
  m.name = t->name;
  m.data = t->data;
  m.type = static_cast<TensorType>(t->type);
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(*row_bytes(t->type, uint64_t(cols)));
  return m;
}

Matrix row_slice(const Matrix& m, int64_t first, int64_t n) {
  Matrix s = m;
  s.data = m.row(first);
  s.rows = n;
  return s;
}

const uint8_t* file_row(const Matrix& m, int64_t r, uint8_t* buf) {
  if (!m.panels) return m.row(r);
  unpack_panel_row(m.type, m.panel(r / kPanelRows), m.cols, int(r % kPanelRows), buf);
  return buf;
}

Result<const float*> get_vector(const GgufFile& f, const std::string& name, int64_t n) {
  const TensorInfo* t = f.tensor(name);
  if (!t) return make_error(Status::bad_format, f.path() + ": missing tensor '" + name + "'");
  if (t->dims.size() != 1 || t->dims[0] != uint64_t(n))
    return make_error(Status::bad_format, f.path() + ": tensor '" + name + "' has shape " + shape_str(*t) +
                                              ", expected [" + std::to_string(n) + "]");
  if (t->type != static_cast<uint32_t>(TensorType::F32))
    return make_error(Status::unsupported, f.path() + ": tensor '" + name + "' must be F32");
  if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0)
    return make_error(Status::bad_format, f.path() + ": tensor '" + name + "' is misaligned");
  return reinterpret_cast<const float*>(t->data);
}

}  // namespace pllm
