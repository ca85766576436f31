src/backends/vulkan/generated/backends/vulkan/glu.spv.inc: \
  /work/main/src/backends/vulkan/shaders/glu.comp
