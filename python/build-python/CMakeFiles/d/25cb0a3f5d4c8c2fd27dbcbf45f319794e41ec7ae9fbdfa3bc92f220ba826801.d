src/backends/vulkan/generated/backends/vulkan/rmsnorm.spv.inc: \
  /work/main/src/backends/vulkan/shaders/rmsnorm.comp
