// Shared by the matmul shaders: the weight binding read by byte offset, push constants, the
// tile geometry and the workgroup reduction.
//
// Geometry: a workgroup of 64 invocations computes MM_ROWS = 4 output rows for a tile of up to
// MM_TILE = 8 activation rows. The 16 lanes of one output row split the row into units of 32
// elements (a 32-element block, or one 32-element sub-block of a 256-element K block); each
// unit is decoded once and applied to every activation row of the tile, so prefill does not
// decode a weight block per row. Partial sums meet in shared memory (not subgroup operations:
// lanes of one row may straddle subgroups, and the subgroup size differs between devices).
//
// The weight type is specialisation constant 0 (the ggml type id): the driver folds the
// per-type switch away when it builds each pipeline, so every type gets its own code without
// a .comp per type.
#extension GL_GOOGLE_include_directive : require
#ifdef MM_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

#define MM_ROWS 4u
#define MM_LANES 16u
#define MM_TILE 8u

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0;

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

// Q4_K / Q5_K: 6-bit scale and min of sub-block j from the 12 scale bytes at b (ggml's
// get_scale_min_k4).
void scale_min_k4(uint b, uint j, out float sc, out float m) {
  if (j < 4u) {
    sc = float(ld8(b + j) & 63u);
    m = float(ld8(b + j + 4u) & 63u);
  } else {
    const uint hi = ld8(b + j + 4u);
    sc = float((hi & 0xFu) | ((ld8(b + j - 4u) >> 6) << 4));
    m = float((hi >> 4) | ((ld8(b + j) >> 6) << 4));
  }
}

shared float red[64 * MM_TILE];

// Sums acc over the 16 lanes of each output row and writes the tile's outputs.
void reduce_and_store(float acc[MM_TILE], uint t, uint lane, uint r, uint x0, uint nt) {
  for (uint j = 0u; j < MM_TILE; ++j) red[t * MM_TILE + j] = acc[j];
  barrier();
  for (uint s = MM_LANES / 2u; s > 0u; s >>= 1) {
    if (lane < s)
      for (uint j = 0u; j < MM_TILE; ++j) red[t * MM_TILE + j] += red[(t + s) * MM_TILE + j];
    barrier();
  }
  if (lane == 0u && r < p.nrows)
    for (uint j = 0u; j < MM_TILE; ++j)
      if (j < nt) y[(x0 + j) * p.y_stride + p.row0 + r] = red[t * MM_TILE + j];
}
