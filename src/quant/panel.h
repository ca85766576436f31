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
// Q4_K is packed per super-block (16 rows x 256 elements, 2304 B = the 16 file blocks):
//   d[16] (fp16), dmin[16] (fp16), scales: 12 x 16 B (byte k of each row's 12 packed 6-bit
//   scale bytes together, lane i = row i, so unpacking them is the file's byte operations run
//   lane-wise over 16 rows) | units 0..7: 4 Q4 vectors of 64 B each
// where unit u holds the block's elements 32u..32u+31 (the file's low nibbles of
// qs[32 * (u / 2) ...] for even u, high for odd).
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
// panel layout (for Q4_K an eighth of a super-block: the panel's size is still this times
// n / 32, and n is a multiple of 256).
size_t panel_block_bytes(TensorType t);
inline bool panel_supported(TensorType t) { return panel_block_bytes(t) != 0; }

// Packs 16 rows of n elements (row r at rows + r * row_stride, the file's layout) into one
// panel at dst (panel_block_bytes(t) * n / 32 bytes). n must be a multiple of the type's block.
void pack_panel(TensorType t, const uint8_t* rows, size_t row_stride, int64_t n, uint8_t* dst);

// Writes row j (0..15) of a panel back in the file's row layout (row_bytes of n elements):
// the exact inverse of pack_panel.
void unpack_panel_row(TensorType t, const uint8_t* panel, int64_t n, int j, uint8_t* dst_row);

}  // namespace pllm
