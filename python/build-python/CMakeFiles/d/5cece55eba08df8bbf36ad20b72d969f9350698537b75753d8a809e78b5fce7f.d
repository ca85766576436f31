src/backends/vulkan/generated/backends/vulkan/matmul_float.spv.inc: \
  /work/main/src/backends/vulkan/shaders/matmul_float.comp \
  /work/main/src/backends/vulkan/shaders/matmul_common.glsl \
  /work/main/src/backends/vulkan/shaders/matmul_float.glsl
