// Block layouts of the quantised formats, byte-compatible with ggml / GGUF.
//
// Weight formats (read straight out of GGUF files, must match ggml exactly):
//   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL (32 elements per block), Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
//   IQ4_XS (QK_K = 256 per block).
// Activation formats (produced at run time by quantize_act, never stored in files):
//   block_q8_0 (same as the weight format), block_q8_1 (our own layout: float d and
//   the precomputed float sum s = d * sum(qs); NOT the 36-byte ggml Q8_1 layout, so
//   size it with TypeKernels::act_bytes, not row_bytes), block_q8_K (ggml layout).
//
// Structs only: no functions here, so the header is safe to include from
// translation units compiled with ISA-specific flags.
#pragma once
#include <cstdint>

namespace pllm {

inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
inline constexpr int QK8_1 = 32;
inline constexpr int QK_K = 256;
inline constexpr int K_SCALE_SIZE = 12;

// x = d * (q - 8); element j (0..15) is the low nibble of qs[j], element j+16 the high nibble.
struct block_q4_0 {
  uint16_t d;  // fp16
  uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 must be 18 bytes");

// x = d * q + m, same nibble order as Q4_0.
struct block_q4_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 must be 20 bytes");

// x = d * (q - 16) with a 5-bit q: its low 4 bits as in Q4_0 (element j in the low nibble
// of qs[j], element j+16 in the high nibble), its high bit is bit j of the little-endian
// 32-bit word qh (byte j/8, bit j%8).
struct block_q5_0 {
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 must be 22 bytes");

// x = d * q + m, 5-bit q laid out as in Q5_0.
struct block_q5_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 must be 24 bytes");

// x = d * qs[j].
struct block_q8_0 {
  uint16_t d;  // fp16
  int8_t qs[QK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 must be 34 bytes");

// Activation format for Q4_1 weights: x ~= d * qs[j]; s = d * sum(qs) (for the min term).
struct block_q8_1 {
  float d;
  float s;
  int8_t qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 40, "block_q8_1 must be 40 bytes");

// Activation format of int16 mode (ActMode::int16), for every quantised weight type:
// 32 activations x ~= d * qs[j] with d = max|x| / 32767 (a rounding step 2^-16 of the block
// maximum, 256 times finer than Q8's); sum = the exact sum of qs, for weight offsets and mins.
struct block_q16 {
  float d;
  int32_t sum;
  int16_t qs[32];
};
static_assert(sizeof(block_q16) == 72, "block_q16 must be 72 bytes");

// 256 elements in 8 sub-blocks of 32. scales holds eight 6-bit scales and eight
// 6-bit mins (see ref::get_scale_min_k4). x = d * sc_j * q - dmin * m_j.
// qs: 32 bytes per pair of sub-blocks; low nibbles = first, high nibbles = second.
struct block_q4_K {
  uint16_t d;     // fp16, super-block scale for the scales
  uint16_t dmin;  // fp16, super-block scale for the mins
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144, "block_q4_K must be 144 bytes");

// 256 elements, 6-bit quants: low 4 bits in ql, high 2 bits in qh; 16 signed 8-bit
// scales, one per 16 consecutive elements (scales[i] covers elements 16i..16i+15).
struct block_q6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;  // fp16
};
static_assert(sizeof(block_q6_K) == 210, "block_q6_K must be 210 bytes");

// 256 elements in 16 sub-blocks of 16; 2-bit q. scales[i] covers elements 16i..16i+15: low
// nibble the scale, high nibble the min. x = (d * sc_i) * q - dmin * m_i. qs: 32 bytes per
// 128-element half h; element 128h + 32j + l (j 0..3, l 0..31) is bits 2j..2j+1 of qs[32h + l].
struct block_q2_K {
  uint8_t scales[QK_K / 16];
  uint8_t qs[QK_K / 4];
  uint16_t d;     // fp16, super-block scale for the scales
  uint16_t dmin;  // fp16, super-block scale for the mins
};
static_assert(sizeof(block_q2_K) == 84, "block_q2_K must be 84 bytes");

// 256 elements in 16 sub-blocks of 16; 3-bit q = (2 low bits as Q2_K's qs) - (hmask bit clear
// ? 4 : 0), i.e. -4..3; element 128h + 32j + l takes bit 4h + j of hmask[l]. scales: sixteen
// 6-bit values (stored + 32) packed in 12 bytes (ref::q3_K_scales). x = (d * (sc_i - 32)) * q.
struct block_q3_K {
  uint8_t hmask[QK_K / 8];
  uint8_t qs[QK_K / 4];
  uint8_t scales[12];
  uint16_t d;  // fp16
};
static_assert(sizeof(block_q3_K) == 110, "block_q3_K must be 110 bytes");

// 256 elements in 8 sub-blocks of 32, Q4_K's scales and nibbles plus a fifth bit: element
// 64p + l (p 0..3, l 0..31) has bit 2p of qh[l] at 16, element 64p + 32 + l bit 2p + 1.
// x = (d * sc_j) * q - dmin * m_j with q 0..31.
struct block_q5_K {
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_q5_K) == 176, "block_q5_K must be 176 bytes");

// The 16 non-linear levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// x = d * kIq4nlValues[q], q a nibble in Q4_0's order (element j low nibble of qs[j],
// element j + 16 its high nibble).
struct block_iq4_nl {
  uint16_t d;  // fp16
  uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl must be 18 bytes");

// 256 elements in 8 sub-blocks of 32, each laid out as an IQ4_NL block's nibbles (qs + 16 j).
// Sub-block j's 6-bit scale ls = (nibble j of scales_l) | (bits 2j..2j+1 of scales_h) << 4;
// x = (d * (ls - 32)) * kIq4nlValues[q].
struct block_iq4_xs {
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs must be 136 bytes");

// Activation format for K-quant weights: x ~= d * qs[j]; bsums[i] = sum of qs[16i..16i+15].
struct block_q8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};
static_assert(sizeof(block_q8_K) == 292, "block_q8_K must be 292 bytes");

}  // namespace pllm
