#version 450
// rope_apply on every head of n rows: one invocation per rotated pair. cs row r holds the
// n_rot floats rope_angles() gave for that row's position (cos of pair i at i, sin at
// n_rot/2 + i); neox rotates (i, i + n_rot/2), else (2i, 2i + 1). Dims past n_rot stay.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer CS { float cs[]; };
layout(push_constant) uniform P { int n, n_heads, head_dim, n_rot, neox; };

void main() {
  const uint half_rot = uint(n_rot) / 2u;
  const uint per_row = uint(n_heads) * half_rot;
  const uint total = uint(n) * per_row, step = gl_NumWorkGroups.x * 256u;
  for (uint g = gl_GlobalInvocationID.x; g < total; g += step) {
    const uint r = g / per_row, rest = g % per_row, h = rest / half_rot, i = rest % half_rot;
    const float c = cs[r * uint(n_rot) + i], s = cs[r * uint(n_rot) + half_rot + i];
    const uint base = (r * uint(n_heads) + h) * uint(head_dim);
    const uint a = base + (neox != 0 ? i : 2u * i), b = base + (neox != 0 ? i + half_rot : 2u * i + 1u);
    const float x0 = x[a], x1 = x[b];
    precise float y0 = x0 * c - x1 * s;
    precise float y1 = x0 * s + x1 * c;
    x[a] = y0;
    x[b] = y1;
  }
}
