#version 450
// CpuLayers::residual: y = from[r] + bias (add_f32), optionally y = rmsnorm(y) * post_norm
// (rmsnorm_f32), then x[r] += y; same order of f32 operations. One workgroup per row
// (grid-strided); `from` is only read.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer From { float f[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) readonly buffer Norm { float w[]; };
layout(push_constant) uniform P {
  int n, width;
  float eps;
  int has_bias, has_norm;
};
shared float part[256];

float from_row(uint base, uint i) {
  precise float v = f[base + i];
  if (has_bias != 0) v = v + b[i];
  return v;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < uint(n); r += gl_NumWorkGroups.x) {
    const uint base = r * uint(width);
    float scale = 1.0;
    if (has_norm != 0) {  // uniform across the workgroup: the barriers are reached by all
      float ss = 0.0;
      for (uint i = t; i < uint(width); i += 256u) {
        const float v = from_row(base, i);
        ss += v * v;
      }
      part[t] = ss;
      barrier();
      for (uint s = 128u; s > 0u; s >>= 1) {
        if (t < s) part[t] += part[t + s];
        barrier();
      }
      scale = 1.0 / sqrt(part[0] / float(width) + eps);
      barrier();
    }
    for (uint i = t; i < uint(width); i += 256u) {
      precise float v = from_row(base, i);
      if (has_norm != 0) v = v * scale * w[i];
      x[base + i] = x[base + i] + v;
    }
  }
}
