#include "backends/vulkan/vk_device.h"

#include <cstdlib>
#include <cstring>

namespace pllm::vk {
namespace {

const char* kValidation = "VK_LAYER_KHRONOS_validation";

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

int type_rank(const std::string& t) {  // higher is preferred
  return t == "discrete" ? 4 : t == "integrated" ? 3 : t == "virtual" ? 2 : t == "other" ? 1 : 0;
}

bool has_extension(const Loader& fn, VkPhysicalDevice pd, const char* ext) {
  uint32_t n = 0;
  if (fn.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> exts(n);
  if (fn.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data()) != VK_SUCCESS) return false;
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, ext) == 0) return true;
  return false;
}

bool has_layer(const Loader& fn, const char* name) {
  uint32_t n = 0;
  if (fn.vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  if (fn.vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

// The feature structs we query and enable, chained.
struct Features {
  VkPhysicalDeviceFeatures2 base{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDevice8BitStorageFeatures s8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  void chain(bool with_dot) {
    base.pNext = &s16;
    s16.pNext = &s8;
    s8.pNext = &f16i8;
    f16i8.pNext = with_dot ? &dot : nullptr;
    dot.pNext = nullptr;
  }
};

DeviceInfo describe(const Loader& fn, VkPhysicalDevice pd, Features& f) {
  DeviceInfo d;
  VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  sub.pNext = &drv;
  VkPhysicalDeviceProperties2 p{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p.pNext = &sub;
  fn.vkGetPhysicalDeviceProperties2(pd, &p);
  const VkPhysicalDeviceProperties& P = p.properties;
  d.name = P.deviceName;
  d.driver = drv.driverName[0] ? std::string(drv.driverName) + " " + drv.driverInfo : "";
  d.type = type_name(P.deviceType);
  d.api_version = P.apiVersion;
  d.vendor_id = P.vendorID;
  d.device_id = P.deviceID;
  d.subgroup_size = sub.subgroupSize;
  d.subgroup_arith = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                     (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  d.subgroup_ballot = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                      (sub.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
  d.shared_memory = P.limits.maxComputeSharedMemorySize;
  d.max_invocations = P.limits.maxComputeWorkGroupInvocations;
  d.max_storage_range = P.limits.maxStorageBufferRange;
  d.storage_align = P.limits.minStorageBufferOffsetAlignment;
  const bool dot_ext = has_extension(fn, pd, "VK_KHR_shader_integer_dot_product");
  f.chain(dot_ext);
  fn.vkGetPhysicalDeviceFeatures2(pd, &f.base);
  d.fp16 = f.f16i8.shaderFloat16 && f.s16.storageBuffer16BitAccess;
  d.int8 = f.f16i8.shaderInt8 && f.s8.storageBuffer8BitAccess;
  d.int_dot = dot_ext && f.dot.shaderIntegerDotProduct && d.int8;
  VkPhysicalDeviceMemoryProperties mem;
  fn.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    d.heaps.push_back({mem.memoryHeaps[i].size, (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    const auto fl = mem.memoryTypes[i].propertyFlags;
    if ((fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) d.uma = true;
  }
  return d;
}

Result<VkInstance> make_instance(Loader& fn, bool validation, uint32_t* version) {
  PLLM_TRY(fn.open());
  uint32_t v = VK_API_VERSION_1_0;
  if (fn.vkEnumerateInstanceVersion(&v) != VK_SUCCESS) v = VK_API_VERSION_1_0;
  *version = v;
  if (v < VK_API_VERSION_1_1)
    return make_error(Status::unsupported, "Vulkan instance version " + version_string(v) + " < 1.1");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "pocketllm";
  app.apiVersion = v >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : v;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  if (validation) {
    if (!has_layer(fn, kValidation))
      return make_error(Status::unsupported, std::string(kValidation) + " is not installed");
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = &kValidation;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = &ext;
  }
  VkInstance inst = VK_NULL_HANDLE;
  PLLM_VK_CHECK(fn.vkCreateInstance(&ci, nullptr, &inst));
  if (auto r = fn.load_instance(inst); !r.ok()) {
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(fn.vkGetInstanceProcAddr(inst, "vkDestroyInstance"));
    if (destroy) destroy(inst, nullptr);
    return r.error();
  }
  return inst;
}

Result<std::vector<VkPhysicalDevice>> physical_devices(const Loader& fn, VkInstance inst) {
  uint32_t n = 0;
  PLLM_VK_CHECK(fn.vkEnumeratePhysicalDevices(inst, &n, nullptr));
  std::vector<VkPhysicalDevice> pds(n);
  PLLM_VK_CHECK(fn.vkEnumeratePhysicalDevices(inst, &n, pds.data()));
  pds.resize(n);
  return pds;
}

}  // namespace

std::string version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

ContextOptions ContextOptions::from_env() {
  ContextOptions o;
  if (const char* d = std::getenv("PLLM_VK_DEVICE"); d && *d) o.device = std::atoi(d);
  o.validation = env_flag("PLLM_VK_VALIDATION");
  o.allow_cpu_device = env_flag("PLLM_VK_ALLOW_CPU_DEVICE");
  o.disable_f16 = env_flag("PLLM_VK_DISABLE_F16");
  o.disable_int_dot = env_flag("PLLM_VK_DISABLE_INT_DOT");
  o.gpu_layout = env_flag("PLLM_VK_GPU_LAYOUT");
  if (const char* n = std::getenv("PLLM_VK_INJECT_LOST"); n && *n) o.inject_lost_after = std::atoi(n);
  return o;
}

ProbeReport probe() {
  ProbeReport rep;
  Loader fn;
  uint32_t version = 0;
  auto inst = make_instance(fn, false, &version);
  rep.loader = fn.vkCreateInstance != nullptr;
  rep.instance_version = version;
  if (!inst.ok()) {
    rep.error = inst.error().message;
    return rep;
  }
  rep.validation_layer = has_layer(fn, kValidation);
  auto pds = physical_devices(fn, *inst);
  if (!pds.ok()) rep.error = pds.error().message;
  else
    for (VkPhysicalDevice pd : *pds) {
      Features f;
      rep.devices.push_back(describe(fn, pd, f));
    }
  if (rep.error.empty() && rep.devices.empty()) rep.error = "no Vulkan device";
  fn.vkDestroyInstance(*inst, nullptr);
  return rep;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    ctx_ = o.ctx_;
    buf_ = o.buf_;
    mem_ = o.mem_;
    size_ = o.size_;
    map_ = o.map_;
    o.ctx_ = nullptr;
    o.buf_ = VK_NULL_HANDLE;
    o.mem_ = VK_NULL_HANDLE;
    o.size_ = 0;
    o.map_ = nullptr;
  }
  return *this;
}

void Buffer::reset() {
  if (!ctx_) return;
  const Loader& fn = ctx_->fn();
  if (map_) fn.vkUnmapMemory(ctx_->device(), mem_);
  if (buf_) fn.vkDestroyBuffer(ctx_->device(), buf_, nullptr);
  if (mem_) fn.vkFreeMemory(ctx_->device(), mem_, nullptr);
  ctx_ = nullptr;
  buf_ = VK_NULL_HANDLE;
  mem_ = VK_NULL_HANDLE;
  map_ = nullptr;
  size_ = 0;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Context::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* d, void* self) {
  auto* c = static_cast<Context*>(self);
  if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    ++c->validation_count_;
    c->validation_last_ = d && d->pMessage ? d->pMessage : "";
  }
  return VK_FALSE;
}

Result<std::unique_ptr<Context>> Context::create(const ContextOptions& o) {
  std::unique_ptr<Context> c(new Context());
  Loader& fn = c->fn_;
  uint32_t version = 0;
  PLLM_ASSIGN(c->inst_, make_instance(fn, o.validation, &version));
  if (o.validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        fn.vkGetInstanceProcAddr(c->inst_, "vkCreateDebugUtilsMessengerEXT"));
    c->destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        fn.vkGetInstanceProcAddr(c->inst_, "vkDestroyDebugUtilsMessengerEXT"));
    if (!create || !c->destroy_messenger_) return make_error(Status::unsupported, "no VK_EXT_debug_utils");
    VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = &Context::on_message;
    mi.pUserData = c.get();
    PLLM_VK_CHECK(create(c->inst_, &mi, nullptr, &c->messenger_));
  }
  PLLM_ASSIGN(auto pds, physical_devices(fn, c->inst_));
  if (pds.empty()) return make_error(Status::unsupported, "no Vulkan device");
  int pick = -1;
  std::vector<DeviceInfo> infos;
  for (VkPhysicalDevice pd : pds) {
    Features f;
    infos.push_back(describe(fn, pd, f));
  }
  if (o.device >= 0) {
    if (o.device >= int(pds.size()))
      return make_error(Status::invalid_argument, "Vulkan device " + std::to_string(o.device) + " does not exist (" +
                                                      std::to_string(pds.size()) + " found)");
    pick = o.device;
  } else {
    for (int i = 0; i < int(infos.size()); ++i) {
      if (infos[size_t(i)].api_version < VK_API_VERSION_1_1) continue;
      if (infos[size_t(i)].type == "cpu" && !o.allow_cpu_device) continue;
      if (pick < 0 || type_rank(infos[size_t(i)].type) > type_rank(infos[size_t(pick)].type)) pick = i;
    }
    if (pick < 0)
      return make_error(Status::unsupported, infos.size() == 1 && infos[0].type == "cpu"
                                                 ? "the only Vulkan device is a CPU device (" + infos[0].name + ")"
                                                 : "no usable Vulkan GPU");
  }
  c->phys_ = pds[size_t(pick)];
  c->info_ = infos[size_t(pick)];
  if (c->info_.api_version < VK_API_VERSION_1_1)
    return make_error(Status::unsupported, "Vulkan device API " + version_string(c->info_.api_version) + " < 1.1");

  // One queue family with compute.
  uint32_t nq = 0;
  fn.vkGetPhysicalDeviceQueueFamilyProperties(c->phys_, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qfs(nq);
  fn.vkGetPhysicalDeviceQueueFamilyProperties(c->phys_, &nq, qfs.data());
  int qf = -1;
  for (uint32_t i = 0; i < nq && qf < 0; ++i)
    if (qfs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) qf = int(i);
  if (qf < 0) return make_error(Status::unsupported, "the Vulkan device has no compute queue");
  c->qf_ = uint32_t(qf);

  // Enable only what we use: fp16 / int8 storage and arithmetic, packed int8 dot.
  Features want;
  describe(fn, c->phys_, want);
  c->use_f16_ = c->info_.fp16 && !o.disable_f16;
  c->use_int_dot_ = c->info_.int_dot && !o.disable_int_dot;
  Features en;
  en.chain(c->use_int_dot_);
  en.s16.storageBuffer16BitAccess = c->use_f16_;
  en.f16i8.shaderFloat16 = c->use_f16_;
  en.s8.storageBuffer8BitAccess = want.s8.storageBuffer8BitAccess;
  en.f16i8.shaderInt8 = want.f16i8.shaderInt8;
  en.dot.shaderIntegerDotProduct = c->use_int_dot_;
  en.base.features.shaderInt16 = want.base.features.shaderInt16;
  std::vector<const char*> exts;
  if (c->use_int_dot_) exts.push_back("VK_KHR_shader_integer_dot_product");
  for (const char* e : {"VK_KHR_16bit_storage", "VK_KHR_8bit_storage", "VK_KHR_shader_float16_int8"})
    if (has_extension(fn, c->phys_, e)) exts.push_back(e);
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = c->qf_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &en.base;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = uint32_t(exts.size());
  dci.ppEnabledExtensionNames = exts.data();
  PLLM_VK_CHECK(fn.vkCreateDevice(c->phys_, &dci, nullptr, &c->dev_));
  PLLM_TRY(fn.load_device(c->dev_));
  fn.vkGetDeviceQueue(c->dev_, c->qf_, 0, &c->queue_);
  fn.vkGetPhysicalDeviceMemoryProperties(c->phys_, &c->mem_);
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = c->qf_;
  PLLM_VK_CHECK(fn.vkCreateCommandPool(c->dev_, &pci, nullptr, &c->upload_pool_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  PLLM_VK_CHECK(fn.vkCreateFence(c->dev_, &fci, nullptr, &c->fence_));
  c->inject_lost_after_ = o.inject_lost_after;
  c->gpu_layout_ = o.gpu_layout;
  return c;
}

Context::~Context() {
  if (dev_) {
    fn_.vkDeviceWaitIdle(dev_);
    if (fence_) fn_.vkDestroyFence(dev_, fence_, nullptr);
    if (upload_pool_) fn_.vkDestroyCommandPool(dev_, upload_pool_, nullptr);
    fn_.vkDestroyDevice(dev_, nullptr);
  }
  if (messenger_ && destroy_messenger_) destroy_messenger_(inst_, messenger_, nullptr);
  if (inst_) fn_.vkDestroyInstance(inst_, nullptr);
}

int Context::memory_type(uint32_t bits, Mem where) const {
  // Preference lists: device memory that the host can also map (UMA: no staging copies),
  // then plain device memory; host memory cached for readback, then any host-visible.
  using F = VkMemoryPropertyFlags;
  const F dl = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
          hc = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  const F dev_prefs[] = {dl | hv, dl, hv};
  const F host_prefs[] = {hv | hc, hv};
  const F* prefs = where == Mem::device ? dev_prefs : host_prefs;
  const int n = where == Mem::device ? 3 : 2;
  for (int p = 0; p < n; ++p)
    for (uint32_t i = 0; i < mem_.memoryTypeCount; ++i)
      if ((bits & (1u << i)) && (mem_.memoryTypes[i].propertyFlags & prefs[p]) == prefs[p]) return int(i);
  return -1;
}

Result<Buffer> Context::buffer(size_t bytes, Mem where) const {
  Buffer b;
  b.ctx_ = this;
  b.size_ = bytes;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes ? bytes : 4;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  PLLM_VK_CHECK(fn_.vkCreateBuffer(dev_, &bi, nullptr, &b.buf_));
  VkMemoryRequirements req;
  fn_.vkGetBufferMemoryRequirements(dev_, b.buf_, &req);
  const int mt = memory_type(req.memoryTypeBits, where);
  if (mt < 0) return make_error(Status::unsupported, "Vulkan: no suitable memory type");
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = uint32_t(mt);
  PLLM_VK_CHECK(fn_.vkAllocateMemory(dev_, &ai, nullptr, &b.mem_));
  PLLM_VK_CHECK(fn_.vkBindBufferMemory(dev_, b.buf_, b.mem_, 0));
  if (mem_.memoryTypes[mt].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
    PLLM_VK_CHECK(fn_.vkMapMemory(dev_, b.mem_, 0, VK_WHOLE_SIZE, 0, &b.map_));
  return b;
}

Result<void> Context::upload(const Buffer& dst, size_t offset, const void* src, size_t bytes) {
  if (offset > dst.size() || bytes > dst.size() - offset)
    return make_error(Status::internal, "Vulkan: upload past the end of a buffer");
  if (dst.mapped()) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
    return {};
  }
  // Through a staging buffer in pieces of at most 64 MiB.
  const size_t piece = std::min<size_t>(bytes, size_t(64) << 20);
  PLLM_ASSIGN(Buffer staging, buffer(piece, Mem::host));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = upload_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb;
  PLLM_VK_CHECK(fn_.vkAllocateCommandBuffers(dev_, &ai, &cb));
  for (size_t done = 0; done < bytes; done += piece) {
    const size_t n = std::min(piece, bytes - done);
    std::memcpy(staging.mapped(), static_cast<const uint8_t*>(src) + done, n);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    PLLM_VK_CHECK(fn_.vkBeginCommandBuffer(cb, &bi));
    VkBufferCopy region{0, offset + done, n};
    fn_.vkCmdCopyBuffer(cb, staging.handle(), dst.handle(), 1, &region);
    PLLM_VK_CHECK(fn_.vkEndCommandBuffer(cb));
    PLLM_TRY(submit_and_wait(cb));
  }
  return {};
}

Result<void> Context::submit_and_wait(VkCommandBuffer cb) {
  if (lost_) return vk_error("vkQueueSubmit", VK_ERROR_DEVICE_LOST);
  if (inject_lost_after_ > 0 && ++submits_ >= inject_lost_after_) {
    lost_ = true;
    return vk_error("vkQueueSubmit (injected)", VK_ERROR_DEVICE_LOST);
  }
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  PLLM_VK_CHECK(fn_.vkResetFences(dev_, 1, &fence_));
  VkResult r = fn_.vkQueueSubmit(queue_, 1, &si, fence_);
  if (r == VK_SUCCESS) r = fn_.vkWaitForFences(dev_, 1, &fence_, VK_TRUE, UINT64_MAX);
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
  if (r != VK_SUCCESS) return vk_error("vkQueueSubmit", r);
  return {};
}

}  // namespace pllm::vk
