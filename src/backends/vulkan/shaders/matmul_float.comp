#version 450
// Float path, 16-bit fields read through uint loads + unpackHalf2x16 (no fp16 storage).
#extension GL_GOOGLE_include_directive : require
#include "matmul_float.glsl"
