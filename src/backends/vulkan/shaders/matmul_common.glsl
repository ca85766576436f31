// Shared by the matmul shaders: the weight binding read by byte offset, push constants, the
// tile geometry and the workgroup reduction.
//
// Geometry (specialisation constants, chosen per device by vk_matmul.cpp): a workgroup of 64
// invocations computes 64 / LANES output rows for a tile of TILE activation rows (1 for
// decode, 8 for prefill: each decoded weight unit is applied to every row of the tile, so
// prefill does not decode a weight block per row).
//   GPUs: LANES = 16 lanes split one output row into units of 32 elements (a 32-element
//         block, or one sub-block of a 256-element K block), so neighbouring lanes read
//         neighbouring weight bytes; partial sums meet in shared memory (not subgroup
//         operations: lanes of one row may straddle subgroups, and the subgroup size differs
//         between devices).
//   CPU devices (lavapipe): LANES = 1, one invocation per output row and no reduction. A
//         SIMD lane there is an invocation and every non-uniform load is a scalar loop over
//         lanes; with MM_XBCAST (a subgroup of at least 8 lanes, all on the same units) each
//         lane loads one vec4 of the activation unit and the others get it by
//         subgroupBroadcast, which turns eight loads into one.
// Weights are decoded four at a time into vec4s / words held in registers (loops over
// constant trip counts are unrolled), never into indexed arrays, which llvmpipe would keep in
// scratch memory.
//
// The weight type is specialisation constant 0 (the ggml type id): the driver folds the
// per-type switch away when it builds each pipeline, so every type gets its own code without
// a .comp per type.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef MM_XBCAST
#extension GL_KHR_shader_subgroup_ballot : require
#endif
#ifdef MM_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0;
layout(constant_id = 1) const uint LANES = 16;  // invocations per output row: 1, 2, 4 ... 64
layout(constant_id = 2) const uint TILE = 8;    // activation rows per workgroup
const uint MM_ROWS = 64u / LANES;

// ggml type ids.
#define T_F32 0u
#define T_F16 1u
#define T_Q4_0 2u
#define T_Q4_1 3u
#define T_Q5_0 6u
#define T_Q5_1 7u
#define T_Q8_0 8u
#define T_Q4_K 12u
#define T_Q5_K 13u
#define T_Q6_K 14u
#define T_Q3_K 11u
#define T_IQ4_NL 20u
#define T_IQ4_XS 23u

// Block structs are byte-packed (18, 20, 22, 34, 210 bytes...), so the weights are read as
// words and fields are cut out by byte offset. The fp16 variant aliases the same binding as
// halves for the 16-bit fields.
layout(std430, binding = 0) readonly buffer Wu { uint wu[]; };
#ifdef MM_F16
layout(std430, binding = 0) readonly buffer Wh { float16_t wh[]; };
#endif

layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
  uint cols;       // elements per weight row (= activation row length)
  uint row_bytes;  // bytes per weight row
  uint w_skip;     // bytes from the binding's start to this range's first row (alignment slack)
  uint nrows;      // weight rows in this range
  uint row0;       // output column of this range's first row
  uint y_stride;   // floats per output row (W.rows)
  uint n;          // activation rows
  uint scale_base; // int8 path: scratch word index of the activation scales
  uint sum_base;   // int8 path: scratch word index of the 32-element code sums
  uint qblk;       // int8 path: elements per activation scale (32, or 256 for K types)
} p;

// 4 bytes at any byte offset. When b is not word-aligned the second word reaches up to 3
// bytes past the field; the host binds whole words (vk_matmul.cpp).
uint ld32(uint b) {
  const uint i = b >> 2, s = (b & 3u) * 8u;
  const uint lo = wu[i];
  return s == 0u ? lo : (lo >> s) | (wu[i + 1u] << (32u - s));
}
// N (<= 8) words of bytes starting at an even byte offset b, with N + 1 loads whatever b's
// alignment (ld32 per word would take two loads each, as both sides of its select run on
// SIMD lanes). The extra word is only read when b is 2 mod 4 (then it holds the run's last
// two bytes); otherwise the last word is read again, so nothing past the run is touched.
#define LD_RUN(dst, N, b)                                                  \
  {                                                                        \
    const uint i_ = (b) >> 2, s_ = ((b) & 2u) * 8u;                        \
    uint prev_ = wu[i_];                                                   \
    [[unroll]] for (uint k_ = 0u; k_ < N; ++k_) {                          \
      const uint next_ = wu[i_ + k_ + (k_ + 1u < N ? 1u : s_ >> 4)];       \
      dst[k_] = (prev_ >> s_) | ((next_ << 16) << (16u - s_));             \
      prev_ = next_;                                                       \
    }                                                                      \
  }
// The four bytes of w as floats (unsigned / signed).
vec4 ubytes(uint w) { return vec4((uvec4(w) >> uvec4(0u, 8u, 16u, 24u)) & 0xFFu); }
vec4 sbytes(uint w) { return vec4(ivec4(uvec4(w) << uvec4(24u, 16u, 8u, 0u)) >> 24); }
uint ld8(uint b) { return (wu[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
// An fp16 field at an even byte offset.
float ldh(uint b) {
#ifdef MM_F16
  return float(wh[b >> 1]);
#else
  return unpackHalf2x16(wu[b >> 2] >> ((b & 2u) * 8u)).x;
#endif
}
int sbyte(uint w, uint k) { return bitfieldExtract(int(w), int(k * 8u), 8); }

// IQ4_NL / IQ4_XS: the 16 levels (quant/blocks.h kIq4nlValues), packed 4 per word as int8.
const uint IQ4_LEVELS[4] = uint[4](0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);
// The level of each byte of w (each < 16) as a signed byte, in place.
uint iq4_bytes(uint w) {
  uint r = 0u;
  [[unroll]] for (uint k = 0u; k < 4u; ++k) {
    const uint i = (w >> (8u * k)) & 0xFu;
    r |= ((IQ4_LEVELS[i >> 2] >> (8u * (i & 3u))) & 0xFFu) << (8u * k);
  }
  return r;
}
// Q3_K: the signed scale (6-bit value - 32) of sub-block i from the 12 scale bytes s[3].
int q3k_scale(const uint s[3], uint i) {
  const uint lo = ((s[(i & 7u) >> 2] >> (8u * (i & 3u))) >> (i < 8u ? 0u : 4u)) & 0xFu;
  const uint hi = ((s[2] >> (8u * (i & 3u))) >> (2u * (i >> 2))) & 3u;
  return int(lo | (hi << 4)) - 32;
}
// Q3_K unit j of the super-block at byte b (even): its 32 codes q + 4 (0..7) as bytes, d and the
// two sub-blocks' signed scales.
void q3k_unit(uint b, uint j, out uint v[8], out float d, out int s0, out int s1) {
  uint s[3], hm[8], qs[8];
  LD_RUN(s, 3u, b + 96u);
  LD_RUN(hm, 8u, b);
  LD_RUN(qs, 8u, b + 32u + 32u * (j >> 2));
  d = ldh(b + 108u);
  s0 = q3k_scale(s, 2u * j);
  s1 = q3k_scale(s, 2u * j + 1u);
  [[unroll]] for (uint k = 0u; k < 8u; ++k)
    v[k] = ((qs[k] >> (2u * (j & 3u))) & 0x03030303u) | (((hm[k] >> j) & 0x01010101u) << 2);
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block j from the 12 scale bytes at b (ggml's
// get_scale_min_k4), b word-aligned: three loads, the bytes picked by shifts.
void scale_min_k4(uint b, uint j, out float sc, out float m) {
  const uint i = b >> 2, sh = 8u * (j & 3u);
  const uint a = (wu[i] >> sh) & 0xFFu, c = (wu[i + 1u] >> sh) & 0xFFu, e = (wu[i + 2u] >> sh) & 0xFFu;
  sc = float(j < 4u ? a & 63u : (e & 0xFu) | ((a >> 6) << 4));
  m = float(j < 4u ? c & 63u : (e >> 4) | ((c >> 6) << 4));
}

shared float red[LANES > 1u ? 64u * TILE : 1u];

// Sums acc over the LANES lanes of each output row (shared memory, log2(LANES) steps) and
// writes the tile's outputs: rows x0 .. x0 + nt - 1 of Y, column row0 + r.
void reduce_and_store(inout float acc[TILE], uint t, uint lane, uint r, uint x0, uint nt) {
  if (LANES > 1u) {
    [[unroll]] for (uint j = 0u; j < TILE; ++j) red[t * TILE + j] = acc[j];
    barrier();
    for (uint s = LANES / 2u; s > 0u; s >>= 1) {
      if (lane < s)
        [[unroll]] for (uint j = 0u; j < TILE; ++j) red[t * TILE + j] += red[(t + s) * TILE + j];
      barrier();
    }
    [[unroll]] for (uint j = 0u; j < TILE; ++j) acc[j] = red[t * TILE + j];
  }
  if (lane == 0u && r < p.nrows)
    [[unroll]] for (uint j = 0u; j < TILE; ++j)
      if (j < nt) y[(x0 + j) * p.y_stride + p.row0 + r] = acc[j];
}
