// The int8 path (the CPU's ActMode::int8): activations were rounded to int8 codes by
// matmul_quant_act; each 32-element weight unit is decoded to 32 signed bytes (4 per word)
// and dotted with the codes in integers, then scaled:
//   y += da * (dw * (s_lo * dot(first 16) + s_hi * dot(last 16)) + mw * sum(codes))
// s_lo / s_hi: the K types' integer sub-scales (1 elsewhere); mw: the min term of Q4_1,
// Q5_1, Q4_K, Q5_K. Bindings: 0 weights, 1 scratch (codes [n][cols/4] words, scales from
// p.scale_base [n][cols/qblk] f32, sums from p.sum_base [n][cols/32] int), 2 Y.
// MM_DOT: packed int8 dot products (OpSDot, SPV_KHR_integer_dot_product). glslang 11.13
// (glslc 2023.2) has no GL_EXT_integer_dot_product, so the instruction is declared through
// GL_EXT_spirv_intrinsics.
#include "matmul_common.glsl"

layout(std430, binding = 1) readonly buffer A { uint aq[]; };

#ifdef MM_DOT
// (GL_EXT_spirv_intrinsics is enabled by matmul_int_dot.comp, before any code.)
// OpSDot (4450) with the PackedVectorFormat4x8Bit operand; capabilities DotProduct (6019)
// and DotProductInput4x8BitPacked (6018).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot_packed(uint a, uint b, spirv_literal int packed_format);
int dot4(uint a, uint b) { return sdot_packed(a, b, 0); }
#else
int dot4(uint a, uint b) {
  return sbyte(a, 0u) * sbyte(b, 0u) + sbyte(a, 1u) * sbyte(b, 1u) + sbyte(a, 2u) * sbyte(b, 2u) +
         sbyte(a, 3u) * sbyte(b, 3u);
}
#endif

// Bytes v - c for bytes v in [0, 63] and c <= 32, without borrows between bytes: v + 128 - c
// stays in [96, 191] per byte, and flipping the top bit gives v - c in two's complement.
uint sub_bytes(uint v, uint c) { return ((v | 0x80808080u) - c * 0x01010101u) ^ 0x80808080u; }

const bool HAS_MIN = TYPE == T_Q4_1 || TYPE == T_Q5_1 || TYPE == T_Q4_K || TYPE == T_Q5_K;

// Unit u of the row at byte rb as 8 words of signed bytes (elements 4i..4i+3 in word i).
// Constant indices only (after unrolling), so q stays in registers.
void decode(uint rb, uint u, out uint q[8], out int s_lo, out int s_hi, out float dw, out float mw) {
  s_lo = 1;
  s_hi = 1;
  mw = 0.0;
  if (TYPE == T_Q4_0 || TYPE == T_Q4_1 || TYPE == T_Q5_0 || TYPE == T_Q5_1) {
    const bool q5 = TYPE == T_Q5_0 || TYPE == T_Q5_1;
    const uint offs = TYPE == T_Q4_0 ? 8u : TYPE == T_Q5_0 ? 16u : 0u;
    uint v[5];  // Q5: qh, then the nibble words; Q4: the nibble words
    if (TYPE == T_Q4_0 || TYPE == T_Q5_0) {  // 18 / 22 bytes at even offsets: d, (qh), qs
      const uint b = rb + u * (TYPE == T_Q4_0 ? 18u : 22u);
      dw = ldh(b);
      LD_RUN(v, (q5 ? 5u : 4u), b + 2u);
    } else {  // 20 / 24 bytes, word-aligned: d, m, (qh), qs
      const uint i = (rb + u * (TYPE == T_Q4_1 ? 20u : 24u)) >> 2;
      const vec2 dm = unpackHalf2x16(wu[i]);
      dw = dm.x;
      mw = dm.y;
      [[unroll]] for (uint k = 0u; k < (q5 ? 5u : 4u); ++k) v[k] = wu[i + 1u + k];
    }
    const uint qh = q5 ? v[0] : 0u;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      const uint w = v[q5 ? i + 1u : i];
      uint lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
      if (q5) {
        // Spread qh bits 4i..4i+3 (and 16+4i..) to bit 4 of bytes 0..3.
        const uint a = (qh >> (4u * i)) & 0xFu, c = (qh >> (16u + 4u * i)) & 0xFu;
        lo |= ((a & 1u) | ((a & 2u) << 7) | ((a & 4u) << 14) | ((a & 8u) << 21)) << 4;
        hi |= ((c & 1u) | ((c & 2u) << 7) | ((c & 4u) << 14) | ((c & 8u) << 21)) << 4;
      }
      q[i] = offs != 0u ? sub_bytes(lo, offs) : lo;
      q[4u + i] = offs != 0u ? sub_bytes(hi, offs) : hi;
    }
  } else if (TYPE == T_Q8_0) {
    const uint b = rb + u * 34u;
    dw = ldh(b);
    LD_RUN(q, 8u, b + 2u);
  } else if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
    const uint bb = TYPE == T_Q4_K ? 144u : 176u;
    const uint j = u & 7u;
    const uint b = rb + (u >> 3) * bb;
    float sc, mn;
    scale_min_k4(b + 4u, j, sc, mn);
    s_lo = s_hi = int(sc);
    const vec2 dm = unpackHalf2x16(wu[b >> 2]);
    dw = dm.x;
    mw = -dm.y * mn;
    const uint qs = (b + (TYPE == T_Q4_K ? 16u : 48u) + 32u * (j >> 1)) >> 2;
    const uint sh = 4u * (j & 1u);
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      const uint h = TYPE == T_Q5_K ? ((wu[(b >> 2) + 4u + i] >> j) & 0x01010101u) << 4 : 0u;
      q[i] = ((wu[qs + i] >> sh) & 0x0F0F0F0Fu) | h;
    }
  } else if (TYPE == T_IQ4_NL || TYPE == T_IQ4_XS) {
    uint v[4];
    if (TYPE == T_IQ4_NL) {  // 18 bytes at even offsets: d, qs
      const uint b = rb + u * 18u;
      dw = ldh(b);
      LD_RUN(v, 4u, b + 2u);
    } else {  // 136-byte super-blocks, word-aligned: d, scales_h, scales_l, qs (16 per unit)
      const uint j = u & 7u, i = (rb + (u >> 3) * 136u) >> 2;
      dw = unpackHalf2x16(wu[i]).x;
      s_lo = s_hi = int(((wu[i + 1u] >> (4u * j)) & 0xFu) | (((wu[i] >> (16u + 2u * j)) & 3u) << 4)) - 32;
      [[unroll]] for (uint k = 0u; k < 4u; ++k) v[k] = wu[i + 2u + 4u * j + k];
    }
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      q[k] = iq4_bytes(v[k] & 0x0F0F0F0Fu);
      q[4u + k] = iq4_bytes((v[k] >> 4) & 0x0F0F0F0Fu);
    }
  } else if (TYPE == T_Q3_K) {
    uint v[8];
    q3k_unit(rb + (u >> 3) * 110u, u & 7u, v, dw, s_lo, s_hi);
    [[unroll]] for (uint k = 0u; k < 8u; ++k) q[k] = sub_bytes(v[k], 4u);
  } else if (TYPE == T_Q6_K) {
    const uint j = u & 7u, h = j >> 2, qd = j & 3u;
    const uint b = rb + (u >> 3) * 210u;
    dw = ldh(b + 208u);
    const uint s01 = wu[(b + 192u + 2u * j) >> 2] >> (((b + 192u + 2u * j) & 2u) * 8u);
    s_lo = bitfieldExtract(int(s01), 0, 8);
    s_hi = bitfieldExtract(int(s01), 8, 8);
    uint ql[8], qh[8];
    LD_RUN(ql, 8u, b + 64u * h + 32u * (qd & 1u));
    LD_RUN(qh, 8u, b + 128u + 32u * h);
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      const uint v = ((ql[i] >> (4u * (qd >> 1))) & 0x0F0F0F0Fu) | (((qh[i] >> (2u * qd)) & 0x03030303u) << 4);
      q[i] = sub_bytes(v, 32u);
    }
  }
}

void main() {
  const uint t = gl_LocalInvocationID.x, lane = t % LANES;
  const uint r = gl_WorkGroupID.x * MM_ROWS + t / LANES;
  const uint x0 = gl_WorkGroupID.y * TILE;
  const uint nt = min(TILE, p.n - x0);
  // Rows past the range (the last workgroup) compute row nrows - 1 again and do not store; rows
  // past n (the last tile) read row n - 1. All lanes stay active (MM_XBCAST).
  const uint rb = p.w_skip + min(r, p.nrows - 1u) * p.row_bytes;
  float acc[TILE];
  [[unroll]] for (uint j = 0u; j < TILE; ++j) acc[j] = 0.0;
  const uint units = p.cols / 32u, code_words = p.cols / 4u, n_scales = p.cols / p.qblk;
  for (uint u = lane; u < units; u += LANES) {
    uint q[8];
    int s_lo, s_hi;
    float dw, mw;
    decode(rb, u, q, s_lo, s_hi, dw, mw);
    [[unroll]] for (uint j = 0u; j < TILE; ++j) {
      const uint row = min(x0 + j, p.n - 1u), c = row * code_words + u * 8u;
      const uint si = p.scale_base + row * n_scales + (u * 32u) / p.qblk, mi = p.sum_base + row * units + u;
#ifdef MM_XBCAST
      // Lane l loads code word l of the unit, lanes 0 and 1 also the scale and the code sum;
      // the subgroup shares them.
      const uint l = gl_SubgroupInvocationID & 7u;
      const uint a = aq[c + l], sm = aq[l == 0u ? si : mi];
      const int lo = dot4(q[0], subgroupBroadcast(a, 0u)) + dot4(q[1], subgroupBroadcast(a, 1u)) +
                     dot4(q[2], subgroupBroadcast(a, 2u)) + dot4(q[3], subgroupBroadcast(a, 3u));
      const int hi = dot4(q[4], subgroupBroadcast(a, 4u)) + dot4(q[5], subgroupBroadcast(a, 5u)) +
                     dot4(q[6], subgroupBroadcast(a, 6u)) + dot4(q[7], subgroupBroadcast(a, 7u));
      const float da = uintBitsToFloat(subgroupBroadcast(sm, 0u));
      const int sum = int(subgroupBroadcast(sm, 1u));
#else
      const int lo = dot4(q[0], aq[c]) + dot4(q[1], aq[c + 1u]) + dot4(q[2], aq[c + 2u]) + dot4(q[3], aq[c + 3u]);
      const int hi = dot4(q[4], aq[c + 4u]) + dot4(q[5], aq[c + 5u]) + dot4(q[6], aq[c + 6u]) + dot4(q[7], aq[c + 7u]);
      const float da = uintBitsToFloat(aq[si]);
      const int sum = HAS_MIN ? int(aq[mi]) : 0;
#endif
      float v = dw * float(s_lo * lo + s_hi * hi);
      if (HAS_MIN) v += mw * float(sum);
      acc[j] += da * v;
    }
  }
  reduce_and_store(acc, t, lane, r, x0, nt);
}
