#include "backends/vulkan/vk_kernel.h"

#include <vector>

namespace pllm::vk {
namespace {
constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kBuffersPerSet = 8;
}  // namespace

Result<std::unique_ptr<Kernel>> Kernel::create(const Context& ctx, const char* name, std::span<const uint32_t> spirv,
                                               int n_buffers, uint32_t push_bytes,
                                               std::initializer_list<uint32_t> spec) {
  if (n_buffers < 1 || n_buffers > int(kBuffersPerSet))
    return make_error(Status::internal, std::string("Vulkan kernel ") + name + ": bad binding count");
  std::unique_ptr<Kernel> k(new Kernel());
  k->ctx_ = &ctx;
  k->name_ = name;
  k->n_buffers_ = n_buffers;
  k->push_bytes_ = push_bytes;
  const Loader& fn = ctx.fn();
  VkDevice dev = ctx.device();
  std::vector<VkDescriptorSetLayoutBinding> b(static_cast<size_t>(n_buffers));
  for (int i = 0; i < n_buffers; ++i)
    b[size_t(i)] = {uint32_t(i), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo sli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  sli.bindingCount = uint32_t(n_buffers);
  sli.pBindings = b.data();
  PLLM_VK_CHECK(fn.vkCreateDescriptorSetLayout(dev, &sli, nullptr, &k->set_layout_));
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &k->set_layout_;
  pli.pushConstantRangeCount = push_bytes ? 1 : 0;
  pli.pPushConstantRanges = &pr;
  PLLM_VK_CHECK(fn.vkCreatePipelineLayout(dev, &pli, nullptr, &k->layout_));
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = spirv.size() * 4;
  mi.pCode = spirv.data();
  VkShaderModule mod;
  PLLM_VK_CHECK(fn.vkCreateShaderModule(dev, &mi, nullptr, &mod));
  std::vector<uint32_t> spec_values(spec);
  std::vector<VkSpecializationMapEntry> entries;
  for (uint32_t i = 0; i < spec_values.size(); ++i) entries.push_back({i, i * 4, 4});
  VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec_values.size() * 4, spec_values.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = mod;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &si;
  ci.layout = k->layout_;
  const VkResult r = fn.vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &k->pipe_);
  fn.vkDestroyShaderModule(dev, mod, nullptr);
  if (r != VK_SUCCESS) return vk_error(name, r);
  return k;
}

Kernel::~Kernel() {
  if (!ctx_) return;
  const Loader& fn = ctx_->fn();
  if (pipe_) fn.vkDestroyPipeline(ctx_->device(), pipe_, nullptr);
  if (layout_) fn.vkDestroyPipelineLayout(ctx_->device(), layout_, nullptr);
  if (set_layout_) fn.vkDestroyDescriptorSetLayout(ctx_->device(), set_layout_, nullptr);
}

Result<std::unique_ptr<Recorder>> Recorder::create(Context& ctx) {
  std::unique_ptr<Recorder> r(new Recorder(ctx));
  const Loader& fn = ctx.fn();
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = ctx.queue_family();
  PLLM_VK_CHECK(fn.vkCreateCommandPool(ctx.device(), &pci, nullptr, &r->cmd_pool_));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = r->cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  PLLM_VK_CHECK(fn.vkAllocateCommandBuffers(ctx.device(), &ai, &r->cb_));
  PLLM_ASSIGN(VkDescriptorPool p, r->new_pool());
  r->pools_.push_back(p);
  return r;
}

Recorder::~Recorder() {
  const Loader& fn = ctx_.fn();
  for (VkDescriptorPool p : pools_) fn.vkDestroyDescriptorPool(ctx_.device(), p, nullptr);
  if (cmd_pool_) fn.vkDestroyCommandPool(ctx_.device(), cmd_pool_, nullptr);
}

Result<VkDescriptorPool> Recorder::new_pool() {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBuffersPerSet};
  VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  ci.maxSets = kSetsPerPool;
  ci.poolSizeCount = 1;
  ci.pPoolSizes = &size;
  VkDescriptorPool p;
  PLLM_VK_CHECK(ctx_.fn().vkCreateDescriptorPool(ctx_.device(), &ci, nullptr, &p));
  return p;
}

Result<void> Recorder::begin() {
  const Loader& fn = ctx_.fn();
  for (VkDescriptorPool p : pools_) PLLM_VK_CHECK(fn.vkResetDescriptorPool(ctx_.device(), p, 0));
  pool_ = 0;
  error_ = {};
  n_dispatch_ = 0;
  PLLM_VK_CHECK(fn.vkResetCommandBuffer(cb_, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  PLLM_VK_CHECK(fn.vkBeginCommandBuffer(cb_, &bi));
  return {};
}

void Recorder::dispatch(const Kernel& k, std::initializer_list<View> views, const void* push, uint32_t gx,
                        uint32_t gy, uint32_t gz, bool with_barrier) {
  if (!error_.ok()) return;
  if (int(views.size()) != k.n_buffers()) {
    error_ = make_error(Status::internal, std::string("Vulkan kernel ") + k.name() + ": wrong number of buffers");
    return;
  }
  const Loader& fn = ctx_.fn();
  VkDescriptorSetLayout layout = k.set_layout();
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  for (;;) {
    ai.descriptorPool = pools_[pool_];
    const VkResult r = fn.vkAllocateDescriptorSets(ctx_.device(), &ai, &set);
    if (r == VK_SUCCESS) break;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) {
      error_ = vk_error("vkAllocateDescriptorSets", r);
      return;
    }
    if (++pool_ == pools_.size()) {
      auto p = new_pool();
      if (!p.ok()) {
        error_ = p.error();
        return;
      }
      pools_.push_back(*p);
    }
  }
  VkDescriptorBufferInfo infos[kBuffersPerSet];
  VkWriteDescriptorSet writes[kBuffersPerSet];
  int i = 0;
  for (const View& v : views) {
    infos[i] = {v.buf, v.offset, v.range};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
    ++i;
  }
  fn.vkUpdateDescriptorSets(ctx_.device(), uint32_t(i), writes, 0, nullptr);
  fn.vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline());
  fn.vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout(), 0, 1, &set, 0, nullptr);
  if (k.push_bytes()) fn.vkCmdPushConstants(cb_, k.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes(), push);
  fn.vkCmdDispatch(cb_, gx, gy, gz);
  ++n_dispatch_;
  if (with_barrier) barrier();
}

void Recorder::barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_HOST_READ_BIT;
  ctx_.fn().vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                     VK_PIPELINE_STAGE_HOST_BIT,
                                 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Recorder::copy(View src, View dst) {
  if (!error_.ok()) return;
  VkBufferCopy region{src.offset, dst.offset, src.range};
  ctx_.fn().vkCmdCopyBuffer(cb_, src.buf, dst.buf, 1, &region);
  barrier();
}

Result<void> Recorder::submit() {
  if (!error_.ok()) return error_;
  PLLM_VK_CHECK(ctx_.fn().vkEndCommandBuffer(cb_));
  return ctx_.submit_and_wait(cb_);
}

}  // namespace pllm::vk
