#include <string_view>

#include "model/arch.h"

namespace pllm {

const ArchDescriptor* find_arch(std::string_view name) {
  static const ArchDescriptor* const kAll[] = {&kArchLlama, &kArchQwen2, &kArchGemma3, &kArchDeci};
  for (const ArchDescriptor* a : kAll)
    if (name == a->name) return a;
  return nullptr;
}

const char* supported_arch_names() { return "llama, qwen2, gemma3, deci"; }

}  // namespace pllm
