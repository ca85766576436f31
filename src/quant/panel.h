// Load-time weight repacking: 16-row panels for the W4A8/W8A8 decode and prefill kernels.
//
// In a GGUF file every row is a run of blocks ([d][qs] [d][qs] ...), so a kernel that
// computes many rows at once spends most of its instructions gathering scales, unpacking
// nibbles and summing horizontally. A panel stores 16 consecutive rows block by block in
// the order an int8 dot instruction consumes them: one 64-byte vector holds, for each of
// the 16 rows (4 bytes per row, "lane" i = row i), the quants of 4 consecutive elements,
// so `dot(vector, broadcast(4 activation bytes))` yields 16 row partial sums in 16 lanes
// and no horizontal sum is ever needed. Panels are exactly as large as the rows they hold.
//
// Panel block b (one 32-element block of all 16 rows), bytes:
//   Q4_0: d[16] (fp16)                 | qs: 4 vectors of 64 B
//   Q4_1: d[16] (fp16), m[16] (fp16)   | qs: 4 vectors of 64 B
//   Q8_0: d[16] (fp16)                 | qs: 8 vectors of 64 B
//   IQ4_NL: as Q4_0 (its nibbles index kIq4nlValues)
// Q4_K is packed per super-block (16 rows x 256 elements, 2304 B = the 16 file blocks):
//   d[16] (fp16), dmin[16] (fp16), scales: 12 x 16 B (byte k of each row's 12 packed 6-bit
//   scale bytes together, lane i = row i, so unpacking them is the file's byte operations run
//   lane-wise over 16 rows) | units 0..7: 4 Q4 vectors of 64 B each
// where unit u holds the block's elements 32u..32u+31 (the file's low nibbles of
// qs[32 * (u / 2) ...] for even u, high for odd).
// Q5_K is packed as Q4_K (its d, dmin and scales the same header; 2816 B = the 16 file blocks),
//   each unit's 4 Q4 vectors followed by a fifth-bit vector of 64 B: byte 4*i + j, bit g = the
//   fifth bit of element 4g + j of row i (unit u at 256 + 320 u).
// Q3_K is packed per super-block (1760 B = the 16 file blocks): d[16] (fp16), scales: 12 x 16 B
//   (byte k of each row's 12 packed 6-bit scale bytes together) | units 0..7 (192 B each): 2
//   two-bit vectors laid out as Q6_K's high-bit vectors (the element's 2 low bits), then a
//   third-bit vector laid out as Q5_K's fifth-bit one.
// Q2_K is packed per super-block (1344 B = the 16 file blocks): d[16] (fp16), dmin[16] (fp16),
//   scales: 16 x 16 B (scale byte k of each row together) | units 0..7 (128 B each): 2 two-bit
//   vectors laid out as Q3_K's.
// IQ4_XS is packed per super-block (2176 B = the 16 file blocks): d[16] (fp16), scales_h[16]
//   (uint16), scales_l: 4 x 16 B (byte k of each row together) | units 0..7: 4 Q4 vectors of 64 B
//   (unit u: the nibbles at qs + 16 u, in IQ4_NL's order).
// Q6_K is packed per super-block too (16 rows x 256 elements, 3360 B = the 16 file blocks):
//   d[16] (fp16), scales: 16 x 16 B (int8 scale k of each row together, lane i = row i: unit
//   u's two, 2u for its elements 0-15 and 2u + 1 for 16-31, are 32 consecutive bytes) |
//   units 0..7 (384 B each): 4 Q4 vectors of 64 B holding the 4 low bits of each 6-bit q, then
//   2 high-bit vectors of 64 B
// High-bit vector h (0, 1), byte 4*i + j: bits 2f, 2f + 1 = the 2 high bits of element
// 4g + j of row i, g = 2h + (f & 1) + 4 (f >> 1): the groups of Q4 vectors 2h and 2h + 1, so one
// byte shuffle serves both (the kernel then moves field f to bits 4-5 by one word shift).
// The header is 288 B, so the units of every super-block start 32-byte aligned (a super-block
// is 52.5 cache lines: every other one starts mid-line).
// Q4 vector v (0..3), byte 4*i + j: low nibble = element 4v + j of row i, high nibble =
// element 4(v + 4) + j (so v & 0xF gives element group v, v >> 4 group v + 4).
// Q8_0 vector g (0..7), byte 4*i + j: element 4g + j of row i, stored as q + 128 (an
// unsigned byte, so x86's u8 x s8 dot takes it directly; subtract 128 * sum(a)).
// A matrix of R rows (R a multiple of 16) is R / 16 panels, each nb blocks, back to back.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace pllm {

inline constexpr int kPanelRows = 16;

// Bytes of one panel block (16 rows x 32 elements) for a type, 0 if the type has no
// panel layout (for Q4_K, Q5_K and Q6_K an eighth of a super-block: the panel's size is still this
// times n / 32, and n is a multiple of 256).
size_t panel_block_bytes(TensorType t);
inline bool panel_supported(TensorType t) { return panel_block_bytes(t) != 0; }

// Packs 16 rows of n elements (row r at rows + r * row_stride, the file's layout) into one
// panel at dst (panel_block_bytes(t) * n / 32 bytes). n must be a multiple of the type's block.
void pack_panel(TensorType t, const uint8_t* rows, size_t row_stride, int64_t n, uint8_t* dst);

// Writes row j (0..15) of a panel back in the file's row layout (row_bytes of n elements):
// the exact inverse of pack_panel.
void unpack_panel_row(TensorType t, const uint8_t* panel, int64_t n, int j, uint8_t* dst_row);

}  // namespace pllm
