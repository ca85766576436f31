#version 450
// gate[r][j] = act(gate[r][j]) * up[r][j]: SwiGLU (KernelTable::swiglu_f32: g / (1 + exp(-g)) * u)
// or GeGLU (geglu_f32: GELU's tanh approximation). Rows are contiguous n_ff wide.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(push_constant) uniform P { int n, n_ff, gelu; };

void main() {
  const uint total = uint(n) * uint(n_ff), step = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += step) {
    const float x = g[i];
    precise float y;
    if (gelu != 0) {
      // tanh is clamped: a GPU may compute it as a ratio of exponentials that overflows to
      // inf/inf = NaN for large arguments; tanh(+-10) already rounds to +-1 in f32.
      const float t = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -10.0, 10.0);
      y = 0.5 * x * (1.0 + tanh(t)) * u[i];
    } else {
      y = x / (1.0 + exp(-x)) * u[i];
    }
    g[i] = y;
  }
}
