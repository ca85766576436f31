#version 450
// The int8 path's pre-pass: rounds activations X f32 [n][cols] to int8 codes the way the CPU's
// quantize_act does for the weight type's activation format, one invocation per scale block:
//   mode 0 (Q8_0: Q4_0, Q5_0, Q8_0): 32 elements, d = amax / 127, q = round(x * (1 / d)) with
//          ties away from zero (std::round), and the scale the dot uses is d rounded to fp16;
//   mode 1 (Q8_1: Q4_1, Q5_1): 32 elements, q = round-half-even, clamped to [-127, 127], f32 d;
//   mode 2 (Q8_K: K types): the same over 256 elements.
// Output (scratch words): codes [n][cols/4] (4 per word, element order), scales from
// scale_base [n][cols/block] f32, and from sum_base the code sums per 32 elements [n][cols/32]
// (the min terms of Q4_1, Q5_1, Q4_K, Q5_K).
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer A { uint aq[]; };

layout(push_constant) uniform Push {
  uint cols, n, mode, scale_base, sum_base;
} p;

int round_code(float v) {
  if (p.mode == 0u) {  // ties away from zero; v - trunc(v) is exact
    const float t = trunc(v);
    return int(abs(v - t) >= 0.5 ? t + sign(v) : t);
  }
  return clamp(int(roundEven(v)), -127, 127);
}

void main() {
  const uint blk = p.mode == 2u ? 256u : 32u;
  const uint per_row = p.cols / blk;
  const uint g = gl_GlobalInvocationID.x;
  if (g >= p.n * per_row) return;
  const uint row = g / per_row, e0 = row * p.cols + (g % per_row) * blk;
  float amax = 0.0;
  for (uint k = 0u; k < blk; ++k) amax = max(amax, abs(x[e0 + k]));
  const float d = amax / 127.0;
  const float id = d != 0.0 ? 1.0 / d : 0.0;
  for (uint s = 0u; s < blk; s += 32u) {
    int sum = 0;
    for (uint i = 0u; i < 8u; ++i) {
      uint word = 0u;
      for (uint k = 0u; k < 4u; ++k) {
        const int q = round_code(x[e0 + s + 4u * i + k] * id);
        sum += q;
        word |= uint(q & 0xFF) << (8u * k);
      }
      aq[(e0 + s) / 4u + i] = word;
    }
    aq[p.sum_base + (e0 + s) / 32u] = uint(sum);
  }
  aq[p.scale_base + g] = floatBitsToUint(p.mode == 0u ? unpackHalf2x16(packHalf2x16(vec2(d, 0.0))).x : d);
}
