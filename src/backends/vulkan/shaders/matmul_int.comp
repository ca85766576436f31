#version 450
// int8 path, plain int multiply-adds.
#extension GL_GOOGLE_include_directive : require
#include "matmul_int.glsl"
