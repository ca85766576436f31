// The Vulkan entry points we use, loaded at run time from the system's loader
// (libvulkan.so.1 / libvulkan.dylib) so the binary starts, and falls back to the CPU, on a
// machine without one. One table per VkContext; nothing global.
#pragma once
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

#include "base/result.h"

namespace pllm::vk {

// X-macros: global, instance-level and device-level functions.
#define PLLM_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)         \
  X(vkEnumerateInstanceVersion) \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define PLLM_VK_INSTANCE_FNS(X)                 \
  X(vkDestroyInstance)                          \
  X(vkEnumeratePhysicalDevices)                 \
  X(vkGetPhysicalDeviceProperties)              \
  X(vkGetPhysicalDeviceProperties2)             \
  X(vkGetPhysicalDeviceFeatures2)               \
  X(vkGetPhysicalDeviceMemoryProperties)        \
  X(vkGetPhysicalDeviceQueueFamilyProperties)   \
  X(vkEnumerateDeviceExtensionProperties)       \
  X(vkCreateDevice)                             \
  X(vkGetDeviceProcAddr)

#define PLLM_VK_DEVICE_FNS(X)          \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements)     \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkBindBufferMemory)                \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreateDescriptorSetLayout)       \
  X(vkDestroyDescriptorSetLayout)      \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCreateDescriptorPool)            \
  X(vkDestroyDescriptorPool)           \
  X(vkResetDescriptorPool)             \
  X(vkAllocateDescriptorSets)          \
  X(vkUpdateDescriptorSets)            \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkResetCommandBuffer)              \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkCmdBindPipeline)                 \
  X(vkCmdBindDescriptorSets)           \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdPipelineBarrier)              \
  X(vkCmdCopyBuffer)                   \
  X(vkCmdFillBuffer)                   \
  X(vkCreateFence)                     \
  X(vkDestroyFence)                    \
  X(vkResetFences)                     \
  X(vkWaitForFences)                   \
  X(vkQueueSubmit)                     \
  X(vkDeviceWaitIdle)

class Loader {
 public:
  Loader() = default;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  ~Loader();
  // Opens the loader library (PLLM_VK_LOADER overrides its name, for tests) and the global
  // functions. unsupported with the reason when there is none.
  Result<void> open();
  Result<void> load_instance(VkInstance inst);
  Result<void> load_device(VkDevice dev);

#define PLLM_VK_DECLARE(name) PFN_##name name = nullptr;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PLLM_VK_GLOBAL_FNS(PLLM_VK_DECLARE)
  PLLM_VK_INSTANCE_FNS(PLLM_VK_DECLARE)
  PLLM_VK_DEVICE_FNS(PLLM_VK_DECLARE)
#undef PLLM_VK_DECLARE

 private:
  void* lib_ = nullptr;
};

// "VK_ERROR_DEVICE_LOST" etc.
const char* result_name(VkResult r);
// An error naming the call and the result; device loss maps to Status::internal with
// "device lost" in the message (the engine then falls back to the CPU).
Error vk_error(const char* what, VkResult r);

}  // namespace pllm::vk

#define PLLM_VK_CHECK(call)                                          \
  do {                                                               \
    const VkResult pllm_vk_r_ = (call);                              \
    if (pllm_vk_r_ != VK_SUCCESS) return ::pllm::vk::vk_error(#call, pllm_vk_r_); \
  } while (0)
