// `info`: describe a GGUF file as JSON without loading weights.
#pragma once
#include <string>

#include "base/result.h"

namespace pllm {

Result<std::string> inspect_file_json(const std::string& path);

}  // namespace pllm
