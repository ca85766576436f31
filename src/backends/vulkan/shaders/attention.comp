#version 450
#extension GL_GOOGLE_include_directive : require
// Causal attention of query row i (at pos0 + i), head h over the device KV mirror: what
// KvCache::attend_part followed by the division by the sum computes. Workgroup (h, i), 64
// invocations; the visible slots [lo, pos] are taken 64 at a time with an online softmax:
// each invocation scores one slot, the tile's maximum and sum come from shared memory, the
// running output (invocation t owns dims t, t + 64, ...) is rescaled once per tile. Shared
// memory stays bounded whatever the context length. Everything in f32.
//
// Formats (specialisation constant FMT): 0 f32, 1 f16 (uint loads + unpackHalf2x16, exact for
// every half), 2 q8 (int8 codes read four to a word, one f32 scale per 64 channels). For q8
// the query is quantised exactly as the CPU's attn_seg_q8 does it (kv_quantize_q8's rule, see
// kv_num.glsl), so each q.k group is the same exact integer sum times the two scales.
#include "kv_num.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const int FMT = 0;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { uint k[]; };
layout(std430, binding = 2) readonly buffer V { uint v[]; };
layout(std430, binding = 3) readonly buffer KS { float ks[]; };
layout(std430, binding = 4) readonly buffer VS { float vs[]; };
layout(std430, binding = 5) writeonly buffer O { float o[]; };
layout(push_constant) uniform P {
  int pos0, n, n_head, n_head_kv, head_dim, kv_dim;
  float scale;
  int window;
};

const uint T = 64u;  // slots per tile = invocations
shared float s_q[256];
shared int s_qi[256];   // q8: the quantised query
shared float s_dq[4];   // q8: its scales
shared uint s_amax[4];
shared float s_red[T];
shared float s_p[T];

float reduce(float x, bool is_max) {
  const uint t = gl_LocalInvocationID.x;
  s_red[t] = x;
  barrier();
  for (uint s = T / 2u; s > 0u; s >>= 1) {
    if (t < s) s_red[t] = is_max ? max(s_red[t], s_red[t + s]) : s_red[t] + s_red[t + s];
    barrier();
  }
  const float r = s_red[0];
  barrier();
  return r;
}

float score(uint slot, uint koff) {  // scale * q . k of one slot (koff: the kv head's first channel)
  const uint hd = uint(head_dim), D = uint(kv_dim);
  float acc = 0.0;
  if (FMT == 0) {
    const uint b = slot * D + koff;
    for (uint d = 0u; d < hd; ++d) acc += s_q[d] * uintBitsToFloat(k[b + d]);
  } else if (FMT == 1) {
    const uint b = (slot * D + koff) / 2u;
    for (uint d = 0u; d < hd / 2u; ++d) {
      const vec2 kk = unpackHalf2x16(k[b + d]);
      acc += s_q[2u * d] * kk.x + s_q[2u * d + 1u] * kk.y;
    }
  } else {
    const uint b = (slot * D + koff) / 4u, sb = slot * (D / 64u) + koff / 64u;
    for (uint g = 0u; g < hd / 64u; ++g) {
      int isum = 0;  // exact, like the CPU's
      for (uint j = 0u; j < 16u; ++j) {
        const int w = int(k[b + g * 16u + j]);
        const uint d = g * 64u + 4u * j;
        isum += s_qi[d] * bitfieldExtract(w, 0, 8) + s_qi[d + 1u] * bitfieldExtract(w, 8, 8) +
                s_qi[d + 2u] * bitfieldExtract(w, 16, 8) + s_qi[d + 3u] * bitfieldExtract(w, 24, 8);
      }
      acc += s_dq[g] * ks[sb + g] * float(isum);
    }
  }
  return acc * scale;
}

float value(uint slot, uint c) {  // channel c of a slot's value row
  const uint D = uint(kv_dim), e = slot * D + c;
  if (FMT == 0) return uintBitsToFloat(v[e]);
  if (FMT == 1) {
    const vec2 h = unpackHalf2x16(v[e / 2u]);
    return (e & 1u) != 0u ? h.y : h.x;
  }
  return float(bitfieldExtract(int(v[e / 4u]), int(8u * (e & 3u)), 8)) * vs[e / 64u];
}

void main() {
  const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, i = gl_WorkGroupID.y;
  const uint hd = uint(head_dim);
  const uint kvh = h / uint(n_head / n_head_kv), koff = kvh * hd;
  const int pos = pos0 + int(i);
  const int lo = window > 0 ? max(0, pos - window + 1) : 0;
  const uint qoff = (i * uint(n_head) + h) * hd;
  for (uint d = t; d < hd; d += T) s_q[d] = q[qoff + d];
  if (FMT == 2) {
    if (t < 4u) s_amax[t] = 0u;
    barrier();
    for (uint d = t; d < hd; d += T) atomicMax(s_amax[d / 64u], floatBitsToUint(s_q[d]) & 0x7fffffffu);
    barrier();
    for (uint d = t; d < hd; d += T) {
      const uint sc = kv_q8_scale(s_amax[d / 64u]);
      s_qi[d] = kv_q8_code(floatBitsToUint(s_q[d]), sc);
      if (d % 64u == 0u) s_dq[d / 64u] = uintBitsToFloat(sc);
    }
  }
  barrier();

  float m = 0.0, l = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  for (int t0 = lo; t0 <= pos; t0 += int(T)) {
    const int p = t0 + int(t);
    const bool valid = p <= pos;
    const float s = valid ? score(uint(p), koff) : 0.0;
    const float tile_max = reduce(valid ? s : -3.402823466e38, true);
    // The first tile sets the running maximum; later ones rescale what was summed so far.
    const float m_new = t0 == lo ? tile_max : max(m, tile_max);
    const float alpha = t0 == lo ? 0.0 : exp(m - m_new);
    const float pr = valid ? exp(s - m_new) : 0.0;
    s_p[t] = pr;
    l = l * alpha + reduce(pr, false);  // reduce's barriers also publish s_p
    const int cnt = min(int(T), pos - t0 + 1);
    for (uint c = 0u; c < 4u; ++c) {
      const uint d = t + c * T;
      if (d >= hd) break;
      float a = acc[c] * alpha;
      for (int j = 0; j < cnt; ++j) a += s_p[j] * value(uint(t0 + j), koff + d);
      acc[c] = a;
    }
    m = m_new;
    barrier();  // s_p is rewritten by the next tile
  }
  const uint ooff = (i * uint(n_head) + h) * hd;
  for (uint c = 0u; c < 4u; ++c) {
    const uint d = t + c * T;
    if (d < hd) o[ooff + d] = acc[c] / l;
  }
}
