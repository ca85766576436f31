src/backends/vulkan/generated/backends/vulkan/rope.spv.inc: \
  /work/main/src/backends/vulkan/shaders/rope.comp
