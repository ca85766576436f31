#version 450
// Float path, 16-bit fields read as float16_t (Context::use_f16()); arithmetic stays f32.
#extension GL_GOOGLE_include_directive : require
#define MM_F16 1
#include "matmul_float.glsl"
