/work/main/python/build-python/src/backends/vulkan/generated/backends/vulkan/kv_store.spv.inc: /work/main/src/backends/vulkan/shaders/kv_store.comp /work/main/src/backends/vulkan/shaders/kv_num.glsl
