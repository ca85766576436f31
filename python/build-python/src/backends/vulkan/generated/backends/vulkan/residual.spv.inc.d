/work/main/python/build-python/src/backends/vulkan/generated/backends/vulkan/residual.spv.inc: /work/main/src/backends/vulkan/shaders/residual.comp
