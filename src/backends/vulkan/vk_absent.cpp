// Stands in for the Vulkan backend in builds without it (no headers or glslc, or
// -DPLLM_VULKAN=OFF): every engine runs on the CPU.
#include "backends/vulkan/vk_backend.h"

namespace pllm {

Result<std::unique_ptr<VulkanBackend>> VulkanBackend::create(const VulkanOptions&) {
  return make_error(Status::unsupported, "this build has no Vulkan backend");
}

std::string vulkan_probe(bool json) {
  return json ? R"({"vulkan":{"built":false,"available":false,"error":"this build has no Vulkan backend","devices":[]}})"
              : "vulkan: not built (no Vulkan headers or glslc at build time)\n";
}

bool vulkan_built() { return false; }

}  // namespace pllm
