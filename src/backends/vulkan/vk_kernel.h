// Compute pipelines from embedded SPIR-V, and the recorder that turns one step's ops into a
// command buffer: each dispatch binds its storage buffers (a descriptor set from a pool that
// is reset per step), pushes its constants and is followed by a compute barrier.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "backends/vulkan/vk_device.h"

namespace pllm::vk {

// One shader: n storage-buffer bindings (0 .. n-1), push constants of push_bytes, and
// specialization constants 0 .. k-1 (local size etc.).
class Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const Context& ctx, const char* name, std::span<const uint32_t> spirv,
                                               int n_buffers, uint32_t push_bytes,
                                               std::initializer_list<uint32_t> spec = {});
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  const char* name() const { return name_; }
  int n_buffers() const { return n_buffers_; }
  uint32_t push_bytes() const { return push_bytes_; }
  VkPipeline pipeline() const { return pipe_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  Kernel() = default;
  const Context* ctx_ = nullptr;
  const char* name_ = "";
  int n_buffers_ = 0;
  uint32_t push_bytes_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipe_ = VK_NULL_HANDLE;
};

class Recorder {
 public:
  static Result<std::unique_ptr<Recorder>> create(Context& ctx);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Starts a new command buffer (resets the descriptor pools).
  Result<void> begin();
  // Records kernel k over the buffers (binding i = views[i]) with `push` (k.push_bytes()
  // bytes) on gx × gy × gz workgroups, then a compute → compute barrier unless
  // `barrier` is false (the next dispatch does not read what this one writes).
  void dispatch(const Kernel& k, std::initializer_list<View> views, const void* push, uint32_t gx, uint32_t gy = 1,
                uint32_t gz = 1, bool barrier = true);
  void copy(View src, View dst);
  void barrier();
  // Ends, submits and waits. The first recording error (descriptor pool, bad view) is
  // reported here.
  Result<void> submit();
  int dispatches() const { return n_dispatch_; }
  Context& context() { return ctx_; }

 private:
  explicit Recorder(Context& ctx) : ctx_(ctx) {}
  Result<VkDescriptorPool> new_pool();
  Context& ctx_;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools_;
  size_t pool_ = 0;  // the pool sets come from now
  Result<void> error_;
  int n_dispatch_ = 0;
};

}  // namespace pllm::vk
