// The Vulkan device: what a probe finds (pocketllm info --backends), and the context the
// backend runs on (instance, device, one compute queue, buffers).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/vulkan/vk_loader.h"

namespace pllm::vk {

struct HeapInfo {
  uint64_t bytes = 0;
  bool device_local = false;
};

// One physical device as the probe sees it.
struct DeviceInfo {
  std::string name, driver, type;  // type: discrete | integrated | virtual | cpu | other
  uint32_t api_version = 0, vendor_id = 0, device_id = 0;
  bool fp16 = false;         // shaderFloat16 and 16-bit storage buffers
  bool int8 = false;         // shaderInt8 and 8-bit storage buffers
  bool int_dot = false;      // VK_KHR_shader_integer_dot_product (packed int8 dot)
  bool subgroup_arith = false;  // compute-stage subgroup arithmetic
  bool subgroup_ballot = false;  // compute-stage subgroup ballot (subgroupBroadcast)
  uint32_t subgroup_size = 0;
  uint32_t shared_memory = 0;   // maxComputeSharedMemorySize
  uint32_t max_invocations = 0;  // maxComputeWorkGroupInvocations
  uint64_t max_storage_range = 0;
  uint64_t storage_align = 0;   // minStorageBufferOffsetAlignment
  bool uma = false;             // a device-local heap that the host can map
  std::vector<HeapInfo> heaps;
};

struct ProbeReport {
  bool loader = false;  // a Vulkan loader was found
  std::string error;    // why there is no usable device, when there is none
  uint32_t instance_version = 0;
  bool validation_layer = false;  // VK_LAYER_KHRONOS_validation is installed
  std::vector<DeviceInfo> devices;
};

// Never fails: what it cannot find it reports in `error`.
ProbeReport probe();
std::string version_string(uint32_t v);

struct ContextOptions {
  int device = -1;           // index into probe().devices; -1: the best non-CPU device
  bool allow_cpu_device = false;  // with device == -1, accept a CPU device (lavapipe) as well
  bool validation = false;   // enable VK_LAYER_KHRONOS_validation and count its messages
  bool disable_f16 = false;  // use the fp32 shader variants even where fp16 is available
  bool disable_int_dot = false;
  bool gpu_layout = false;   // use the GPU shader layouts on a CPU device too (tests)
  int inject_lost_after = 0;  // > 0: the n-th submit reports VK_ERROR_DEVICE_LOST (tests)
  // Reads PLLM_VK_DEVICE, PLLM_VK_ALLOW_CPU_DEVICE (auto may pick lavapipe: tests), PLLM_VK_VALIDATION, PLLM_VK_DISABLE_F16, PLLM_VK_DISABLE_INT_DOT and
  // PLLM_VK_GPU_LAYOUT and PLLM_VK_INJECT_LOST into the defaults.
  static ContextOptions from_env();
};

class Context;

// A buffer with its own memory. Host buffers are mapped for their whole life.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer() { reset(); }
  void reset();
  VkBuffer handle() const { return buf_; }
  size_t size() const { return size_; }
  void* mapped() const { return map_; }  // null unless host-visible

 private:
  friend class Context;
  const Context* ctx_ = nullptr;
  VkBuffer buf_ = VK_NULL_HANDLE;
  VkDeviceMemory mem_ = VK_NULL_HANDLE;
  size_t size_ = 0;
  void* map_ = nullptr;
};

// A range of a buffer bound to one shader binding.
struct View {
  VkBuffer buf = VK_NULL_HANDLE;
  uint64_t offset = 0, range = 0;
};
inline View view(const Buffer& b, uint64_t off = 0, uint64_t range = 0) {
  return View{b.handle(), off, range ? range : b.size() - off};
}

enum class Mem { device, host };  // device: fastest for shaders; host: mapped (staging, readback)

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(const ContextOptions& o);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Loader& fn() const { return fn_; }
  VkDevice device() const { return dev_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return qf_; }
  const DeviceInfo& info() const { return info_; }
  bool use_f16() const { return use_f16_; }
  bool use_int_dot() const { return use_int_dot_; }
  bool gpu_layout() const { return gpu_layout_; }
  bool lost() const { return lost_; }

  Result<Buffer> buffer(size_t bytes, Mem where) const;
  // Copies bytes into a device buffer at offset (mapped directly where the device buffer is
  // host-visible, as on phones and integrated GPUs; through a staging buffer otherwise).
  Result<void> upload(const Buffer& dst, size_t offset, const void* src, size_t bytes);
  // Submits a recorded command buffer and waits for it. Device loss (real or injected)
  // marks the context lost: every later submit fails at once.
  Result<void> submit_and_wait(VkCommandBuffer cb);
  // Messages of severity warning or error the validation layer reported so far.
  int validation_messages() const { return validation_count_; }
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  const std::string& last_validation_message() const { return validation_last_; }

 private:
  Context() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                   VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* d,
                                                   void* self);
  int memory_type(uint32_t bits, Mem where) const;

  Loader fn_;
  VkInstance inst_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice dev_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t qf_ = 0;
  VkPhysicalDeviceMemoryProperties mem_{};
  VkCommandPool upload_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  DeviceInfo info_;
  bool use_f16_ = false, use_int_dot_ = false, gpu_layout_ = false, lost_ = false;
  int inject_lost_after_ = 0, submits_ = 0;
  int validation_count_ = 0;
  std::string validation_last_;
};

}  // namespace pllm::vk
