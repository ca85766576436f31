src/backends/vulkan/generated/backends/vulkan/matmul_float_f16.spv.inc: \
  /work/main/src/backends/vulkan/shaders/matmul_float_f16.comp \
  /work/main/src/backends/vulkan/shaders/matmul_common.glsl \
  /work/main/src/backends/vulkan/shaders/matmul_float.glsl
