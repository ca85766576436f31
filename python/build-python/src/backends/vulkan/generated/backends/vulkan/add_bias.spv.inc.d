/work/main/python/build-python/src/backends/vulkan/generated/backends/vulkan/add_bias.spv.inc: /work/main/src/backends/vulkan/shaders/add_bias.comp
