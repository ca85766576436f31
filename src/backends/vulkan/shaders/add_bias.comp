#version 450
// x[r][j] += b[j] (add_f32 per row); grid-strided so any size fits the dispatch limit.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(push_constant) uniform P { int n, width; };

void main() {
  const uint total = uint(n) * uint(width), step = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += step) x[i] = x[i] + b[i % uint(width)];
}
