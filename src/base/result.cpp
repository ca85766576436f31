#include "base/result.h"

namespace pllm {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::io_error: return "I/O error";
    case Status::bad_format: return "bad format";
    case Status::unsupported: return "unsupported";
    case Status::out_of_range: return "out of range";
    case Status::out_of_memory: return "out of memory";
    case Status::cancelled: return "cancelled";
    case Status::internal: return "internal error";
  }
  return "unknown";
}

}  // namespace pllm
