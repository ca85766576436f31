// Result<T>: a value or an error (status code + message). No exceptions cross layers.
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace pllm {

enum class Status : int {
  ok = 0,
  invalid_argument = 1,  // a caller passed something wrong
  io_error = 2,          // file missing, unreadable, mmap failed
  bad_format = 3,        // malformed file contents
  unsupported = 4,       // valid but not handled (architecture, tensor type)
  out_of_range = 5,      // e.g. prompt longer than the context
  out_of_memory = 6,
  cancelled = 7,
  internal = 8,
};

const char* status_name(Status s);

struct Error {
  Status code = Status::internal;
  std::string message;
};

inline Error make_error(Status code, std::string message) { return Error{code, std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error err) : v_(std::move(err)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error err) : err_(std::move(err)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace pllm

// Propagate an error from an expression returning Result<...>.
#define PLLM_TRY(expr)                           \
  do {                                           \
    auto pllm_try_r_ = (expr);                   \
    if (!pllm_try_r_.ok()) return pllm_try_r_.error(); \
  } while (0)

#define PLLM_CONCAT_INNER_(a, b) a##b
#define PLLM_CONCAT_(a, b) PLLM_CONCAT_INNER_(a, b)
// PLLM_ASSIGN(auto x, expr): declare x from a Result or return its error.
#define PLLM_ASSIGN(decl, expr) PLLM_ASSIGN_IMPL_(PLLM_CONCAT_(pllm_r_, __LINE__), decl, expr)
#define PLLM_ASSIGN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                       \
  if (!tmp.ok()) return tmp.error();       \
  decl = std::move(tmp).value()
