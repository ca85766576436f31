#version 450
// int8 path for CPU devices (one invocation per row, activation codes shared by
// subgroupBroadcast; see matmul_common.glsl), plain int multiply-adds.
#extension GL_GOOGLE_include_directive : require
#define MM_XBCAST 1
#include "matmul_int.glsl"
