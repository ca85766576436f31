#version 450
// int8 path, packed int8 dot products (Context::use_int_dot()).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_spirv_intrinsics : require
#define MM_DOT 1
#include "matmul_int.glsl"
