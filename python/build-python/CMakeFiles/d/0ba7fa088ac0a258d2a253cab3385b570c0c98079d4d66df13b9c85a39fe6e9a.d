src/backends/vulkan/generated/backends/vulkan/attention.spv.inc: \
  /work/main/src/backends/vulkan/shaders/attention.comp \
  /work/main/src/backends/vulkan/shaders/kv_num.glsl
