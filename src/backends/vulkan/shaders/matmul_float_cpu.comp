#version 450
// Float path for CPU devices (one invocation per row, activations shared by subgroupBroadcast;
// see matmul_common.glsl). 16-bit fields through uint loads.
#extension GL_GOOGLE_include_directive : require
#define MM_XBCAST 1
#include "matmul_float.glsl"
