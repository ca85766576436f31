// The float path (the CPU's exact mode): each 32-element unit of a weight row is decoded to
// exactly the floats ref::dequantize_row_* gives and multiplied with f32 activations, summed in
// f32. Bindings: 0 weights, 1 X f32 [n][cols], 2 Y f32 [n][y_stride].
#include "matmul_common.glsl"

layout(std430, binding = 1) readonly buffer X { float x[]; };

// Unit u of the row starting at byte rb, as 32 floats (zeros past cols for float rows).
void decode(uint rb, uint u, out float w[32]) {
  if (TYPE == T_F32 || TYPE == T_F16) {
    const uint e0 = u * 32u;
    for (uint k = 0u; k < 32u; ++k) {
      const uint e = e0 + k;
      w[k] = e >= p.cols ? 0.0 : TYPE == T_F32 ? uintBitsToFloat(wu[(rb >> 2) + e]) : ldh(rb + 2u * e);
    }
  } else if (TYPE == T_Q4_0 || TYPE == T_Q4_1) {
    const uint bb = TYPE == T_Q4_0 ? 18u : 20u;
    const uint b = rb + u * bb;
    const float d = ldh(b);
    const float m = TYPE == T_Q4_1 ? ldh(b + 2u) : 0.0;
    const uint qs = b + bb - 16u;
    for (uint i = 0u; i < 4u; ++i) {
      const uint q = ld32(qs + 4u * i);
      for (uint k = 0u; k < 4u; ++k) {
        const uint lo = (q >> (8u * k)) & 0xFu, hi = (q >> (8u * k + 4u)) & 0xFu;
        if (TYPE == T_Q4_0) {
          w[4u * i + k] = d * float(int(lo) - 8);
          w[16u + 4u * i + k] = d * float(int(hi) - 8);
        } else {
          w[4u * i + k] = d * float(lo) + m;
          w[16u + 4u * i + k] = d * float(hi) + m;
        }
      }
    }
  } else if (TYPE == T_Q5_0 || TYPE == T_Q5_1) {
    const uint bb = TYPE == T_Q5_0 ? 22u : 24u;
    const uint b = rb + u * bb;
    const float d = ldh(b);
    const float m = TYPE == T_Q5_1 ? ldh(b + 2u) : 0.0;
    const uint qh = ld32(b + bb - 20u);  // bit j: the fifth bit of element j
    const uint qs = b + bb - 16u;
    for (uint i = 0u; i < 4u; ++i) {
      const uint q = ld32(qs + 4u * i);
      for (uint k = 0u; k < 4u; ++k) {
        const uint e = 4u * i + k;
        const uint lo = ((q >> (8u * k)) & 0xFu) | (((qh >> e) & 1u) << 4);
        const uint hi = ((q >> (8u * k + 4u)) & 0xFu) | (((qh >> (e + 16u)) & 1u) << 4);
        if (TYPE == T_Q5_0) {
          w[e] = d * float(int(lo) - 16);
          w[16u + e] = d * float(int(hi) - 16);
        } else {
          w[e] = d * float(lo) + m;
          w[16u + e] = d * float(hi) + m;
        }
      }
    }
  } else if (TYPE == T_Q8_0) {
    const uint b = rb + u * 34u;
    const float d = ldh(b);
    for (uint i = 0u; i < 8u; ++i) {
      const uint q = ld32(b + 2u + 4u * i);
      for (uint k = 0u; k < 4u; ++k) w[4u * i + k] = d * float(sbyte(q, k));
    }
  } else if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
    const uint bb = TYPE == T_Q4_K ? 144u : 176u;
    const uint j = u & 7u;
    const uint b = rb + (u >> 3) * bb;
    float sc, mn;
    scale_min_k4(b + 4u, j, sc, mn);
    const float d1 = ldh(b) * sc, m1 = ldh(b + 2u) * mn;
    const uint qs = b + (TYPE == T_Q4_K ? 16u : 48u) + 32u * (j >> 1);
    const uint sh = 4u * (j & 1u);
    for (uint i = 0u; i < 8u; ++i) {
      const uint q = (ld32(qs + 4u * i) >> sh) & 0x0F0F0F0Fu;
      // Q5_K: the fifth bit of element l of sub-block j is bit j of qh[l].
      const uint h = TYPE == T_Q5_K ? ((ld32(b + 16u + 4u * i) >> j) & 0x01010101u) << 4 : 0u;
      for (uint k = 0u; k < 4u; ++k) w[4u * i + k] = d1 * float(((q | h) >> (8u * k)) & 0xFFu) - m1;
    }
  } else if (TYPE == T_Q6_K) {
    // Sub-block j = 4h + quadrant: low 4 bits in ql (which half of 32 bytes and nibble by
    // quadrant), 2 high bits in qh; scales 2j, 2j+1 for its two halves of 16.
    const uint j = u & 7u, h = j >> 2, qd = j & 3u;
    const uint b = rb + (u >> 3) * 210u;
    const float d = ldh(b + 208u);
    const uint ql = b + 64u * h + 32u * (qd & 1u), qh = b + 128u + 32u * h;
    const uint s0 = ld8(b + 192u + 2u * j), s1 = ld8(b + 193u + 2u * j);
    const float d0 = d * float(bitfieldExtract(int(s0), 0, 8)), d1 = d * float(bitfieldExtract(int(s1), 0, 8));
    for (uint i = 0u; i < 8u; ++i) {
      const uint q = ((ld32(ql + 4u * i) >> (4u * (qd >> 1))) & 0x0F0F0F0Fu) |
                     (((ld32(qh + 4u * i) >> (2u * qd)) & 0x03030303u) << 4);
      for (uint k = 0u; k < 4u; ++k) w[4u * i + k] = (i < 4u ? d0 : d1) * float(int((q >> (8u * k)) & 0xFFu) - 32);
    }
  }
}

void main() {
  const uint t = gl_LocalInvocationID.x, lane = t % MM_LANES;
  const uint r = gl_WorkGroupID.x * MM_ROWS + t / MM_LANES;
  const uint x0 = gl_WorkGroupID.y * MM_TILE;
  const uint nt = min(MM_TILE, p.n - x0);
  float acc[MM_TILE];
  for (uint j = 0u; j < MM_TILE; ++j) acc[j] = 0.0;
  if (r < p.nrows) {
    const uint rb = p.w_skip + r * p.row_bytes;
    const uint units = (p.cols + 31u) / 32u;
    for (uint u = lane; u < units; u += MM_LANES) {
      float w[32];
      decode(rb, u, w);
      const uint e0 = u * 32u, last = min(32u, p.cols - e0) - 1u;
      for (uint j = 0u; j < MM_TILE; ++j) {
        if (j >= nt) break;
        const uint xb = (x0 + j) * p.cols + e0;
        float s = 0.0;
        // min(): float rows may end inside a unit; w is zero there, x is read in bounds.
        for (uint k = 0u; k < 32u; ++k) s += w[k] * x[xb + min(k, last)];
        acc[j] += s;
      }
    }
  }
  reduce_and_store(acc, t, lane, r, x0, nt);
}
