#version 450
#extension GL_GOOGLE_include_directive : require
// KvCache::store for the device mirror: rows k[i], v[i] (f32, kv_dim) go to slots pos0 + i in
// the mirror's format, bit-identical to the CPU cache (see kv_num.glsl). Workgroup
// (x, i, z): row i of K (z = 0) or V (z = 1); x picks 64 channels (f32, q8: one q8 group) or
// 64 channel pairs (f16: two halves per 32-bit word). Everything is stored as 32-bit words,
// so neither 8- nor 16-bit storage is needed.
#include "kv_num.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer K { uint k_in[]; };
layout(std430, binding = 1) readonly buffer V { uint v_in[]; };
layout(std430, binding = 2) writeonly buffer KD { uint k_out[]; };
layout(std430, binding = 3) writeonly buffer VD { uint v_out[]; };
layout(std430, binding = 4) writeonly buffer KS { uint k_scale[]; };
layout(std430, binding = 5) writeonly buffer VS { uint v_scale[]; };
layout(push_constant) uniform P { int fmt, pos0, n, kv_dim; };  // fmt: 0 f32, 1 f16, 2 q8

shared uint s_amax;
shared int s_code[64];

uint src(uint i) { return gl_WorkGroupID.z == 0u ? k_in[i] : v_in[i]; }
void put(uint i, uint w) {
  if (gl_WorkGroupID.z == 0u) k_out[i] = w;
  else v_out[i] = w;
}

void main() {
  const uint lid = gl_LocalInvocationID.x, row = gl_WorkGroupID.y, D = uint(kv_dim);
  const uint slot = uint(pos0) + row;
  if (fmt == 0) {
    const uint j = gl_WorkGroupID.x * 64u + lid;
    if (j < D) put(slot * D + j, src(row * D + j));
  } else if (fmt == 1) {
    const uint p = gl_WorkGroupID.x * 64u + lid;  // pair of channels 2p, 2p + 1
    if (p < D / 2u)
      put(slot * (D / 2u) + p, kv_f32_to_f16(src(row * D + 2u * p)) | (kv_f32_to_f16(src(row * D + 2u * p + 1u)) << 16));
  } else {
    const uint g = gl_WorkGroupID.x, j = g * 64u + lid;  // q8: D is a multiple of 64
    const uint x = src(row * D + j);
    if (lid == 0u) s_amax = 0u;
    barrier();
    // |x| compared as bits: the order of non-negative floats, and no flush of subnormals.
    atomicMax(s_amax, x & 0x7fffffffu);
    barrier();
    const uint scale = kv_q8_scale(s_amax);
    s_code[lid] = kv_q8_code(x, scale);
    barrier();
    if (lid < 16u) {
      uint w = 0u;
      for (uint b = 0u; b < 4u; ++b) w |= (uint(s_code[4u * lid + b]) & 0xffu) << (8u * b);
      put((slot * D + g * 64u) / 4u + lid, w);
    }
    if (lid == 0u) {
      const uint si = slot * (D / 64u) + g;
      if (gl_WorkGroupID.z == 0u) k_scale[si] = scale;
      else v_scale[si] = scale;
    }
  }
}
