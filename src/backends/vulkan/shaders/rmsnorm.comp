#version 450
// out[r] = in[r] / rms(in[r]) * w (rmsnorm_f32), one workgroup per row (grid-strided over
// rows, so any number of rows fits the dispatch limit). out may be the same buffer as in:
// every element is read and written by the same invocation, the sum is complete (barrier)
// before the first write.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer Out { float y[]; };
layout(push_constant) uniform P {
  int n, width;
  float eps;
  int has_w;
};
shared float part[256];

void main() {
  const uint t = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < uint(n); r += gl_NumWorkGroups.x) {
    const uint base = r * uint(width);
    float ss = 0.0;
    for (uint i = t; i < uint(width); i += 256u) ss += x[base + i] * x[base + i];
    part[t] = ss;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
      if (t < s) part[t] += part[t + s];
      barrier();
    }
    const float scale = 1.0 / sqrt(part[0] / float(width) + eps);
    barrier();  // part[0] is read before the next row overwrites it
    for (uint i = t; i < uint(width); i += 256u) {
      precise float v = x[base + i] * scale;
      if (has_w != 0) v = v * w[i];
      y[base + i] = v;
    }
  }
}
