#include "quant/panel.h"

#include <cstring>

#include "quant/blocks.h"

namespace pllm {

namespace {

constexpr int kBlock = 32;

// Nibble layout shared by Q4_0 and Q4_1: file byte k of a row holds element k (low) and
// element k + 16 (high); the panel's vector v byte 4i + j holds element 4v + j (low) and
// 4(v + 4) + j (high) of row i.
inline uint8_t nibble(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 0x0F : qs[e - 16] >> 4; }

void pack_q4(const uint8_t* qs[kPanelRows], uint8_t* out) {
  for (int v = 0; v < 4; ++v)
    for (int i = 0; i < kPanelRows; ++i)
      for (int j = 0; j < 4; ++j)
        out[v * 64 + 4 * i + j] = uint8_t(nibble(qs[i], 4 * v + j) | nibble(qs[i], 4 * (v + 4) + j) << 4);
}

void unpack_q4(const uint8_t* in, int i, uint8_t* qs) {
  uint8_t e[kBlock];
  for (int v = 0; v < 4; ++v)
    for (int j = 0; j < 4; ++j) {
      const uint8_t b = in[v * 64 + 4 * i + j];
      e[4 * v + j] = b & 0x0F;
      e[4 * (v + 4) + j] = b >> 4;
    }
  for (int k = 0; k < 16; ++k) qs[k] = uint8_t(e[k] | e[k + 16] << 4);
}

}  // namespace

size_t panel_block_bytes(TensorType t) {
  switch (t) {
    case TensorType::Q4_0: return kPanelRows * sizeof(block_q4_0);
    case TensorType::Q4_1: return kPanelRows * sizeof(block_q4_1);
    case TensorType::Q8_0: return kPanelRows * sizeof(block_q8_0);
    default: return 0;
  }
}

void pack_panel(TensorType t, const uint8_t* rows, size_t row_stride, int64_t n, uint8_t* dst) {
  const int64_t nb = n / kBlock;
  const size_t pbb = panel_block_bytes(t);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = dst + size_t(b) * pbb;
    const uint8_t* qs[kPanelRows];
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    switch (t) {
      case TensorType::Q4_0:
        for (int i = 0; i < kPanelRows; ++i) {
          const auto* blk = reinterpret_cast<const block_q4_0*>(rows + i * row_stride) + b;
          std::memcpy(&h[i], &blk->d, 2);
          qs[i] = blk->qs;
        }
        pack_q4(qs, out + 32);
        break;
      case TensorType::Q4_1:
        for (int i = 0; i < kPanelRows; ++i) {
          const auto* blk = reinterpret_cast<const block_q4_1*>(rows + i * row_stride) + b;
          std::memcpy(&h[i], &blk->d, 2);
          std::memcpy(&h[kPanelRows + i], &blk->m, 2);
          qs[i] = blk->qs;
        }
        pack_q4(qs, out + 64);
        break;
      case TensorType::Q8_0:
        for (int i = 0; i < kPanelRows; ++i) {
          const auto* blk = reinterpret_cast<const block_q8_0*>(rows + i * row_stride) + b;
          std::memcpy(&h[i], &blk->d, 2);
          for (int g = 0; g < 8; ++g)
            for (int j = 0; j < 4; ++j) out[32 + g * 64 + 4 * i + j] = uint8_t(blk->qs[4 * g + j] ^ 0x80);
        }
        break;
      default: return;
    }
  }
}

void unpack_panel_row(TensorType t, const uint8_t* panel, int64_t n, int i, uint8_t* dst_row) {
  const int64_t nb = n / kBlock;
  const size_t pbb = panel_block_bytes(t);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* in = panel + size_t(b) * pbb;
    switch (t) {
      case TensorType::Q4_0: {
        auto* blk = reinterpret_cast<block_q4_0*>(dst_row) + b;
        std::memcpy(&blk->d, in + 2 * i, 2);
        unpack_q4(in + 32, i, blk->qs);
        break;
      }
      case TensorType::Q4_1: {
        auto* blk = reinterpret_cast<block_q4_1*>(dst_row) + b;
        std::memcpy(&blk->d, in + 2 * i, 2);
        std::memcpy(&blk->m, in + 2 * (kPanelRows + i), 2);
        unpack_q4(in + 64, i, blk->qs);
        break;
      }
      case TensorType::Q8_0: {
        auto* blk = reinterpret_cast<block_q8_0*>(dst_row) + b;
        std::memcpy(&blk->d, in + 2 * i, 2);
        for (int g = 0; g < 8; ++g)
          for (int j = 0; j < 4; ++j) blk->qs[4 * g + j] = int8_t(in[32 + g * 64 + 4 * i + j] ^ 0x80);
        break;
      }
      default: return;
    }
  }
}

}  // namespace pllm
