// The float path (the CPU's exact mode): each 32-element unit of a weight row is decoded to
// exactly the floats ref::dequantize_row_* gives and multiplied with f32 activations, summed in
// f32. Bindings: 0 weights, 1 X f32 [n][cols], 2 Y f32 [n][y_stride].
#include "matmul_common.glsl"

layout(std430, binding = 1) readonly buffer X { float x[]; };
// The same activations four at a time (quantised types: cols is a multiple of 32, so every
// unit starts on a vec4).
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };

// Unit u of a quantised row starting at byte rb: w[i] = elements 4i .. 4i+3. Constant indices
// only (after unrolling), so w stays in registers.
void decode(uint rb, uint u, out vec4 w[8]) {
  if (TYPE == T_Q4_0 || TYPE == T_Q4_1) {
    // Q4_0: 18 bytes (d, 16 nibble bytes), at even offsets; Q4_1: 20 (d, m, ...), word-aligned.
    uint q[4];
    float d, m = 0.0;
    if (TYPE == T_Q4_0) {
      const uint b = rb + u * 18u;
      d = ldh(b);
      LD_RUN(q, 4u, b + 2u);
    } else {
      const uint i = (rb + u * 20u) >> 2;
      const vec2 dm = unpackHalf2x16(wu[i]);
      d = dm.x;
      m = dm.y;
      [[unroll]] for (uint k = 0u; k < 4u; ++k) q[k] = wu[i + 1u + k];
    }
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const vec4 lo = ubytes(q[k] & 0x0F0F0F0Fu), hi = ubytes((q[k] >> 4) & 0x0F0F0F0Fu);
      if (TYPE == T_Q4_0) {
        w[k] = d * (lo - 8.0);
        w[4u + k] = d * (hi - 8.0);
      } else {
        w[k] = d * lo + m;
        w[4u + k] = d * hi + m;
      }
    }
  } else if (TYPE == T_Q5_0 || TYPE == T_Q5_1) {
    // Q5_0: 22 bytes (d, qh, 16 bytes) at even offsets; Q5_1: 24 (d, m, qh, ...), word-aligned.
    uint q[5];  // qh, then the nibble words
    float d, m = 0.0;
    if (TYPE == T_Q5_0) {
      const uint b = rb + u * 22u;
      d = ldh(b);
      LD_RUN(q, 5u, b + 2u);
    } else {
      const uint i = (rb + u * 24u) >> 2;
      const vec2 dm = unpackHalf2x16(wu[i]);
      d = dm.x;
      m = dm.y;
      [[unroll]] for (uint k = 0u; k < 5u; ++k) q[k] = wu[i + 1u + k];
    }
    const uint qh = q[0];  // bit e: the fifth bit of element e
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      const uvec4 sh = uvec4(0u, 1u, 2u, 3u) + 4u * k;
      const vec4 lo = ubytes(q[1u + k] & 0x0F0F0F0Fu) + vec4(((uvec4(qh) >> sh) & 1u) << 4);
      const vec4 hi = ubytes((q[1u + k] >> 4) & 0x0F0F0F0Fu) + vec4(((uvec4(qh) >> (sh + 16u)) & 1u) << 4);
      if (TYPE == T_Q5_0) {
        w[k] = d * (lo - 16.0);
        w[4u + k] = d * (hi - 16.0);
      } else {
        w[k] = d * lo + m;
        w[4u + k] = d * hi + m;
      }
    }
  } else if (TYPE == T_Q8_0) {
    const uint b = rb + u * 34u;  // d, 32 signed bytes; even offsets
    const float d = ldh(b);
    uint q[8];
    LD_RUN(q, 8u, b + 2u);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) w[k] = d * sbytes(q[k]);
  } else if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
    // Super-blocks of 144 / 176 bytes, word-aligned: d, dmin, 12 scale bytes, (Q5_K: 32 qh
    // bytes), 128 nibble bytes; sub-block j uses the low (even j) or high nibbles of 32 bytes.
    const uint bb = TYPE == T_Q4_K ? 144u : 176u;
    const uint j = u & 7u;
    const uint b = rb + (u >> 3) * bb;
    float sc, mn;
    scale_min_k4(b + 4u, j, sc, mn);
    const vec2 dm = unpackHalf2x16(wu[b >> 2]);
    const float d1 = dm.x * sc, m1 = dm.y * mn;
    const uint qs = (b + (TYPE == T_Q4_K ? 16u : 48u) + 32u * (j >> 1)) >> 2;
    const uint sh = 4u * (j & 1u);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint q = (wu[qs + k] >> sh) & 0x0F0F0F0Fu;
      // Q5_K: the fifth bit of element l of sub-block j is bit j of qh[l].
      const uint h = TYPE == T_Q5_K ? ((wu[(b >> 2) + 4u + k] >> j) & 0x01010101u) << 4 : 0u;
      w[k] = d1 * ubytes(q | h) - m1;
    }
  } else if (TYPE == T_IQ4_NL || TYPE == T_IQ4_XS) {
    // IQ4_NL: 18 bytes (d, 16 nibble bytes) at even offsets; IQ4_XS: 136-byte super-blocks,
    // word-aligned: d, scales_h, scales_l (4 bytes), then 16 nibble bytes per sub-block.
    uint q[4];
    float d;
    if (TYPE == T_IQ4_NL) {
      const uint b = rb + u * 18u;
      d = ldh(b);
      LD_RUN(q, 4u, b + 2u);
    } else {
      const uint j = u & 7u, i = (rb + (u >> 3) * 136u) >> 2;
      const uint ls = ((wu[i + 1u] >> (4u * j)) & 0xFu) | (((wu[i] >> (16u + 2u * j)) & 3u) << 4);
      d = unpackHalf2x16(wu[i]).x * float(int(ls) - 32);
      [[unroll]] for (uint k = 0u; k < 4u; ++k) q[k] = wu[i + 2u + 4u * j + k];
    }
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      w[k] = d * sbytes(iq4_bytes(q[k] & 0x0F0F0F0Fu));
      w[4u + k] = d * sbytes(iq4_bytes((q[k] >> 4) & 0x0F0F0F0Fu));
    }
  } else if (TYPE == T_Q3_K) {
    // 110-byte super-blocks at even offsets; x = (d * sc) * q, q = code - 4.
    uint v[8];
    float d;
    int s0, s1;
    q3k_unit(rb + (u >> 3) * 110u, u & 7u, v, d, s0, s1);
    const float d0 = d * float(s0), d1 = d * float(s1);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) w[k] = (k < 4u ? d0 : d1) * (ubytes(v[k]) - 4.0);
  } else if (TYPE == T_Q6_K) {
    // Sub-block j = 4h + quadrant: low 4 bits in ql (which half of 32 bytes and nibble by
    // quadrant), 2 high bits in qh; scales 2j, 2j+1 for its two halves of 16. 210-byte
    // super-blocks at even offsets.
    const uint j = u & 7u, h = j >> 2, qd = j & 3u;
    const uint b = rb + (u >> 3) * 210u;
    const float d = ldh(b + 208u);
    const uint s01 = wu[(b + 192u + 2u * j) >> 2] >> (((b + 192u + 2u * j) & 2u) * 8u);
    const float d0 = d * float(bitfieldExtract(int(s01), 0, 8)), d1 = d * float(bitfieldExtract(int(s01), 8, 8));
    uint ql[8], qh[8];
    LD_RUN(ql, 8u, b + 64u * h + 32u * (qd & 1u));
    LD_RUN(qh, 8u, b + 128u + 32u * h);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) {
      const uint q = ((ql[k] >> (4u * (qd >> 1))) & 0x0F0F0F0Fu) | (((qh[k] >> (2u * qd)) & 0x03030303u) << 4);
      w[k] = (k < 4u ? d0 : d1) * (ubytes(q) - 32.0);
    }
  }
}

// Float weights: element e of the row at byte rb (0 past cols).
float wf(uint rb, uint e) {
  return e >= p.cols ? 0.0 : TYPE == T_F32 ? uintBitsToFloat(wu[(rb >> 2) + e]) : ldh(rb + 2u * e);
}

void main() {
  const uint t = gl_LocalInvocationID.x, lane = t % LANES;
  const uint r = gl_WorkGroupID.x * MM_ROWS + t / LANES;
  const uint x0 = gl_WorkGroupID.y * TILE;
  const uint nt = min(TILE, p.n - x0);
  // Rows past the range (the last workgroup) compute row nrows - 1 again and do not store: all
  // lanes stay active (MM_XBCAST needs every lane of a subgroup).
  const uint rb = p.w_skip + min(r, p.nrows - 1u) * p.row_bytes;
  float acc[TILE];
  [[unroll]] for (uint j = 0u; j < TILE; ++j) acc[j] = 0.0;
  if (TYPE == T_F32 || TYPE == T_F16) {
    // Float rows may end inside a unit: w is zero there, x is read in bounds (min()).
    const uint units = (p.cols + 31u) / 32u;
    for (uint u = lane; u < units; u += LANES) {
      const uint e0 = u * 32u, last = min(32u, p.cols - e0) - 1u;
      for (uint k = 0u; k < 32u; ++k) {
        const float wk = wf(rb, e0 + k);
        [[unroll]] for (uint j = 0u; j < TILE; ++j)
          acc[j] += wk * x[min(x0 + j, p.n - 1u) * p.cols + e0 + min(k, last)];
      }
    }
  } else {
    const uint units = p.cols / 32u;
    for (uint u = lane; u < units; u += LANES) {
      vec4 w[8];
      decode(rb, u, w);
      [[unroll]] for (uint j = 0u; j < TILE; ++j) {
        // Rows past n (the last tile) read row n - 1 and are not stored.
        const uint xb = (min(x0 + j, p.n - 1u) * p.cols + u * 32u) >> 2;
#ifdef MM_XBCAST
        // Lane l loads elements 4l .. 4l+3 of the unit; the subgroup shares them.
        const vec4 xl = x4[xb + (gl_SubgroupInvocationID & 7u)];
        const float s = dot(w[0], subgroupBroadcast(xl, 0u)) + dot(w[1], subgroupBroadcast(xl, 1u)) +
                        dot(w[2], subgroupBroadcast(xl, 2u)) + dot(w[3], subgroupBroadcast(xl, 3u)) +
                        dot(w[4], subgroupBroadcast(xl, 4u)) + dot(w[5], subgroupBroadcast(xl, 5u)) +
                        dot(w[6], subgroupBroadcast(xl, 6u)) + dot(w[7], subgroupBroadcast(xl, 7u));
#else
        float s = 0.0;
        [[unroll]] for (uint k = 0u; k < 8u; ++k) s += dot(w[k], x4[xb + k]);
#endif
        acc[j] += s;
      }
    }
  }
  reduce_and_store(acc, t, lane, r, x0, nt);
}
