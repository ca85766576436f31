src/backends/vulkan/generated/backends/vulkan/matmul_int.spv.inc: \
  /work/main/src/backends/vulkan/shaders/matmul_int.comp \
  /work/main/src/backends/vulkan/shaders/matmul_common.glsl \
  /work/main/src/backends/vulkan/shaders/matmul_int.glsl
