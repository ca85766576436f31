#include <string_view>

#include "model/arch.h"

namespace pllm {

const ArchDescriptor* find_arch(std::string_view name) {
  static const ArchDescriptor* const kAll[] = {&kArchLlama, &kArchQwen2, &kArchGemma3, &kArchDeci, &kArchQwen3,
                                                  &kArchSmolLM3, &kArchGranite, &kArchMiniCPM, &kArchPhi3, &kArchGemma2,
                                                  &kArchLfm2, &kArchQwen35, &kArchGemma4};
  for (const ArchDescriptor* a : kAll)
    if (name == a->name) return a;
  return nullptr;
}

const char* supported_arch_names() { return "llama, qwen2, qwen3, gemma2, gemma3, gemma4, deci, smollm3, granite, minicpm, phi3, lfm2, qwen35"; }

}  // namespace pllm
