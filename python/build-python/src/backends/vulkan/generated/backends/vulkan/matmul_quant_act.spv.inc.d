/work/main/python/build-python/src/backends/vulkan/generated/backends/vulkan/matmul_quant_act.spv.inc: /work/main/src/backends/vulkan/shaders/matmul_quant_act.comp
