src/backends/vulkan/generated/backends/vulkan/matmul_int_cpu.spv.inc: \
  /work/main/src/backends/vulkan/shaders/matmul_int_cpu.comp \
  /work/main/src/backends/vulkan/shaders/matmul_common.glsl \
  /work/main/src/backends/vulkan/shaders/matmul_int.glsl
