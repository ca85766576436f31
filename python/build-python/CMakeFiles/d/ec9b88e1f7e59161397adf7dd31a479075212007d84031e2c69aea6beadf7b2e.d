src/backends/vulkan/generated/backends/vulkan/matmul_float_cpu.spv.inc: \
  /work/main/src/backends/vulkan/shaders/matmul_float_cpu.comp \
  /work/main/src/backends/vulkan/shaders/matmul_common.glsl \
  /work/main/src/backends/vulkan/shaders/matmul_float.glsl
