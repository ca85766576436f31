#include "backends/vulkan/vk_loader.h"

#include <dlfcn.h>

#include <cstdlib>

namespace pllm::vk {

// The library stays loaded for the life of the process: the loader and the drivers it pulls in
// keep static state (and some drivers misbehave when unloaded), as loaders like volk assume.
// dlopen of an already-open library is only a reference count, so later contexts pay nothing.
Loader::~Loader() = default;

Result<void> Loader::open() {
  const char* env = std::getenv("PLLM_VK_LOADER");
#if defined(__APPLE__)
  const char* names[] = {"libvulkan.dylib", "libvulkan.1.dylib", "libMoltenVK.dylib"};
#else
  const char* names[] = {"libvulkan.so.1", "libvulkan.so", nullptr};
#endif
  std::string tried;
  if (env && *env) {
    lib_ = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    tried = env;
  } else {
    for (const char* n : names) {
      if (!n) continue;
      lib_ = dlopen(n, RTLD_NOW | RTLD_LOCAL);
      if (lib_) break;
      tried += tried.empty() ? n : std::string(", ") + n;
    }
  }
  if (!lib_) return make_error(Status::unsupported, "no Vulkan loader (" + tried + ")");
  vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib_, "vkGetInstanceProcAddr"));
  if (!vkGetInstanceProcAddr) return make_error(Status::unsupported, "the Vulkan loader lacks vkGetInstanceProcAddr");
#define PLLM_VK_LOAD(name)                                                          \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(VK_NULL_HANDLE, #name)); \
  if (!name) return make_error(Status::unsupported, "the Vulkan loader lacks " #name);
  PLLM_VK_GLOBAL_FNS(PLLM_VK_LOAD)
#undef PLLM_VK_LOAD
  return {};
}

Result<void> Loader::load_instance(VkInstance inst) {
#define PLLM_VK_LOAD(name)                                                 \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(inst, #name)); \
  if (!name) return make_error(Status::unsupported, "Vulkan instance lacks " #name);
  PLLM_VK_INSTANCE_FNS(PLLM_VK_LOAD)
#undef PLLM_VK_LOAD
  return {};
}

Result<void> Loader::load_device(VkDevice dev) {
#define PLLM_VK_LOAD(name)                                              \
  name = reinterpret_cast<PFN_##name>(vkGetDeviceProcAddr(dev, #name)); \
  if (!name) return make_error(Status::unsupported, "Vulkan device lacks " #name);
  PLLM_VK_DEVICE_FNS(PLLM_VK_LOAD)
#undef PLLM_VK_LOAD
  return {};
}

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult error";
  }
}

Error vk_error(const char* what, VkResult r) {
  const Status s = (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) ? Status::out_of_memory
                   : r == VK_ERROR_DEVICE_LOST ? Status::internal
                                                : Status::unsupported;
  return make_error(s, std::string("Vulkan: ") + what + " failed: " + result_name(r) + " (" + std::to_string(int(r)) + ")");
}

}  // namespace pllm::vk
