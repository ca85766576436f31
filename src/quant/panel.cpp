#include "quant/panel.h"

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "quant/blocks.h"

namespace pllm {

namespace {

constexpr int kBlock = 32;

// Packing runs at load over every repacked weight (a 1.5B file: 1 GB), so it moves 4 bytes
// (one row's share of a 64-byte panel vector) per word operation; byte by byte it took 1.5-2.5 s
// of a 1.5B file's start-up.
uint32_t load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void store4(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
constexpr uint32_t kNibbles = 0x0F0F0F0Fu;

// The panel's nibble vectors (one 32-element unit of 16 rows, 4 x 64 B): vector v byte 4i + j
// holds element 4v + j (low) and 4(v + 4) + j (high) of row i. For row i, src + 4v holds
// elements 4v..4v+3 and src + 4v + 16 elements 4v+16..4v+19, each in the nibble at `shift`.
void pack_q4_row(const uint8_t* src, int shift, int i, uint8_t* out) {
  for (int v = 0; v < 4; ++v) {
    const uint32_t lo = (load4(src + 4 * v) >> shift) & kNibbles, hi = (load4(src + 4 * v + 16) >> shift) & kNibbles;
    store4(out + v * 64 + 4 * i, lo | hi << 4);
  }
}

void unpack_q4_codes(const uint8_t* in, int i, uint8_t e[kBlock]) {
  for (int v = 0; v < 4; ++v)
    for (int j = 0; j < 4; ++j) {
      const uint8_t b = in[v * 64 + 4 * i + j];
      e[4 * v + j] = b & 0x0F;
      e[4 * (v + 4) + j] = b >> 4;
    }
}

// Q4_0 and Q4_1 rows: file byte k of a block holds element k (low) and element k + 16 (high),
// which is the panel's byte already: vector v of row i is the row's bytes 4v..4v+3.
void pack_q4(const uint8_t* qs[kPanelRows], uint8_t* out) {
  for (int i = 0; i < kPanelRows; ++i)
    for (int v = 0; v < 4; ++v) store4(out + v * 64 + 4 * i, load4(qs[i] + 4 * v));
}

void unpack_q4(const uint8_t* in, int i, uint8_t* qs) {
  uint8_t e[kBlock];
  unpack_q4_codes(in, i, e);
  for (int k = 0; k < 16; ++k) qs[k] = uint8_t(e[k] | e[k + 16] << 4);
}

// IQ4_NL blocks are Q4_0's bytes (d, then 16 nibble bytes in the same order): packed as Q4_0.
constexpr bool kIq4Like = sizeof(block_iq4_nl) == sizeof(block_q4_0) && offsetof(block_iq4_nl, qs) == offsetof(block_q4_0, qs);
static_assert(kIq4Like, "IQ4_NL panels take Q4_0's packing");

// Block b of each of the 16 rows.
template <class B>
void row_blocks(const uint8_t* rows, size_t row_stride, int64_t b, const B* blk[kPanelRows]) {
  for (int i = 0; i < kPanelRows; ++i) blk[i] = reinterpret_cast<const B*>(rows + i * row_stride) + b;
}

// n bytes of row i transposed into a header: byte k at out[k * 16 + i] (lane i = row i), and back.
void put_row_bytes(const uint8_t* src, int n, int i, uint8_t* out) {
  for (int k = 0; k < n; ++k) out[k * kPanelRows + i] = src[k];
}
void get_row_bytes(const uint8_t* in, int n, int i, uint8_t* dst) {
  for (int k = 0; k < n; ++k) dst[k] = in[k * kPanelRows + i];
}

// Two-bit field vectors (Q6_K's high bits, Q3_K's low bits): 2 x 64 B at o; byte 4i + m of vector
// hv, bits 2f, 2f + 1 = the field of element 4g + m of row i, g = q6_group(hv, f) (the groups of
// Q4 vectors 2 hv and 2 hv + 1, so one byte shuffle serves both). Element l's field is at bit
// `shift` of src[l].
constexpr int q6_group(int hv, int f) { return 2 * hv + (f & 1) + 4 * (f >> 1); }
void pack_fields2(const uint8_t* src, int shift, int i, uint8_t* o) {
  for (int hv = 0; hv < 2; ++hv) {
    uint32_t b = 0;
    for (int f = 0; f < 4; ++f) b |= ((load4(src + 4 * q6_group(hv, f)) >> shift) & 0x03030303u) << (2 * f);
    store4(o + 64 * hv + 4 * i, b);
  }
}
void unpack_fields2(const uint8_t* o, int i, int shift, uint8_t* dst) {  // or'ed into dst[l] at `shift`
  for (int hv = 0; hv < 2; ++hv)
    for (int m = 0; m < 4; ++m)
      for (int f = 0; f < 4; ++f)
        dst[4 * q6_group(hv, f) + m] |= uint8_t(((o[64 * hv + 4 * i + m] >> (2 * f)) & 3) << shift);
}

// A bit vector (Q5_K's fifth bits, Q3_K's third bits): 64 B at o, byte 4i + m, bit g = the bit of
// element 4g + m of row i, which is bit u of src[4g + m].
void pack_bits(const uint8_t* src, int u, int i, uint8_t* o) {
  for (int m = 0; m < 4; ++m) {
    uint8_t v = 0;
    for (int g = 0; g < 8; ++g) v |= uint8_t(((src[4 * g + m] >> u) & 1) << g);
    o[4 * i + m] = v;
  }
}
void unpack_bits(const uint8_t* o, int i, int u, uint8_t* dst) {  // or'ed into bit u of dst[l]
  for (int l = 0; l < kBlock; ++l) dst[l] |= uint8_t(((o[4 * i + l % 4] >> (l / 4)) & 1) << u);
}

// Q4_K and Q5_K: one panel super-block per 256 elements (the layout in panel.h). Unit u of a
// file block is the low (even u) or high (odd u) nibbles of qs[32 * (u / 2) ...]; Q5_K's fifth
// bit of its element l is bit u of qh[l].
constexpr size_t kQ4KHead = 4 * kPanelRows + 12 * kPanelRows;  // d, dmin, transposed scales: 256 B
template <class B>
constexpr bool kFifth = std::is_same_v<B, block_q5_K>;
template <class B>
constexpr size_t kKUnit = kFifth<B> ? 5 * 64 : 4 * 64;  // 4 Q4 vectors (+ the fifth-bit vector)
static_assert(kQ4KHead + 8 * kKUnit<block_q4_K> == kPanelRows * sizeof(block_q4_K),
              "a Q4_K panel super-block is its rows' bytes");
static_assert(kQ4KHead + 8 * kKUnit<block_q5_K> == kPanelRows * sizeof(block_q5_K),
              "a Q5_K panel super-block is its rows' bytes");

template <class B>
void pack_k4(const uint8_t* rows, size_t row_stride, int64_t sb, uint8_t* out) {
  const B* blk[kPanelRows];
  row_blocks(rows, row_stride, sb, blk);
  for (int i = 0; i < kPanelRows; ++i) {
    std::memcpy(out + 2 * i, &blk[i]->d, 2);
    std::memcpy(out + 2 * (kPanelRows + i), &blk[i]->dmin, 2);
    put_row_bytes(blk[i]->scales, 12, i, out + 4 * kPanelRows);
  }
  for (int u = 0; u < 8; ++u) {
    uint8_t* o = out + kQ4KHead + kKUnit<B> * u;
    for (int i = 0; i < kPanelRows; ++i) pack_q4_row(blk[i]->qs + 32 * (u / 2), 4 * (u % 2), i, o);
    if constexpr (kFifth<B>)
      for (int i = 0; i < kPanelRows; ++i) pack_bits(blk[i]->qh, u, i, o + 256);
  }
}

template <class B>
void unpack_k4(const uint8_t* in, int i, B* blk) {
  std::memcpy(&blk->d, in + 2 * i, 2);
  std::memcpy(&blk->dmin, in + 2 * (kPanelRows + i), 2);
  get_row_bytes(in + 4 * kPanelRows, 12, i, blk->scales);
  for (int u = 0; u < 8; u += 2) {
    uint8_t lo[kBlock], hi[kBlock];
    unpack_q4_codes(in + kQ4KHead + kKUnit<B> * u, i, lo);
    unpack_q4_codes(in + kQ4KHead + kKUnit<B> * (u + 1), i, hi);
    for (int k = 0; k < kBlock; ++k) blk->qs[32 * (u / 2) + k] = uint8_t(lo[k] | hi[k] << 4);
  }
  if constexpr (kFifth<B>) {
    std::memset(blk->qh, 0, sizeof(blk->qh));
    for (int u = 0; u < 8; ++u) unpack_bits(in + kQ4KHead + kKUnit<B> * u + 256, i, u, blk->qh);
  }
}

// Q6_K: one panel super-block per 256 elements (the layout in panel.h). Element l (0..31) of
// unit u = 4h + k of a file block: 4 low bits in the low (k < 2) or high nibble of
// ql[64h + 32(k & 1) + l], 2 high bits at bit 2k of qh[32h + l] (ggml's dequantize_row_q6_K).
constexpr size_t kQ6KHead = 2 * kPanelRows + 16 * kPanelRows;  // d, transposed scales: 288 B
constexpr size_t kQ6KUnit = 6 * 64;                             // 4 low-bit vectors, 2 high-bit ones
static_assert(kQ6KHead + 8 * kQ6KUnit == kPanelRows * sizeof(block_q6_K), "a Q6_K panel super-block is its rows' bytes");

void pack_q6_K(const uint8_t* rows, size_t row_stride, int64_t sb, uint8_t* out) {
  const block_q6_K* blk[kPanelRows];
  row_blocks(rows, row_stride, sb, blk);
  for (int i = 0; i < kPanelRows; ++i) {
    std::memcpy(out + 2 * i, &blk[i]->d, 2);
    put_row_bytes(reinterpret_cast<const uint8_t*>(blk[i]->scales), 16, i, out + 2 * kPanelRows);
  }
  for (int u = 0; u < 8; ++u) {
    const int h = u / 4, k = u % 4;
    uint8_t* o = out + kQ6KHead + kQ6KUnit * u;
    for (int i = 0; i < kPanelRows; ++i) {
      pack_q4_row(blk[i]->ql + 64 * h + 32 * (k & 1), 4 * (k >> 1), i, o);
      pack_fields2(blk[i]->qh + 32 * h, 2 * k, i, o + 256);
    }
  }
}

void unpack_q6_K(const uint8_t* in, int i, block_q6_K* blk) {
  std::memcpy(&blk->d, in + 2 * i, 2);
  get_row_bytes(in + 2 * kPanelRows, 16, i, reinterpret_cast<uint8_t*>(blk->scales));
  std::memset(blk->ql, 0, sizeof(blk->ql));  // every bit of ql and qh is or'ed in below
  std::memset(blk->qh, 0, sizeof(blk->qh));
  for (int u = 0; u < 8; ++u) {
    const int h = u / 4, k = u % 4;
    const uint8_t* o = in + kQ6KHead + kQ6KUnit * u;
    uint8_t lo[kBlock];
    unpack_q4_codes(o, i, lo);
    for (int l = 0; l < kBlock; ++l) blk->ql[64 * h + 32 * (k & 1) + l] |= uint8_t(lo[l] << (4 * (k >> 1)));
    unpack_fields2(o + 256, i, 2 * k, blk->qh + 32 * h);
  }
}

// Q3_K: one panel super-block per 256 elements (the layout in panel.h). Element l (0..31) of unit
// u = 4h + k of a file block: 2 low bits at bit 2k of qs[32h + l], the third at bit u of hmask[l]
// (ggml's dequantize_row_q3_K).
constexpr size_t kQ3KHead = 2 * kPanelRows + 12 * kPanelRows;  // d, transposed scale bytes: 224 B
constexpr size_t kQ3KUnit = 3 * 64;                             // 2 two-bit vectors, 1 third-bit one
static_assert(kQ3KHead + 8 * kQ3KUnit == kPanelRows * sizeof(block_q3_K), "a Q3_K panel super-block is its rows' bytes");

void pack_q3_K(const uint8_t* rows, size_t row_stride, int64_t sb, uint8_t* out) {
  const block_q3_K* blk[kPanelRows];
  row_blocks(rows, row_stride, sb, blk);
  for (int i = 0; i < kPanelRows; ++i) {
    std::memcpy(out + 2 * i, &blk[i]->d, 2);
    put_row_bytes(blk[i]->scales, 12, i, out + 2 * kPanelRows);
  }
  for (int u = 0; u < 8; ++u) {
    const int h = u / 4, k = u % 4;
    uint8_t* o = out + kQ3KHead + kQ3KUnit * u;
    for (int i = 0; i < kPanelRows; ++i) {
      pack_fields2(blk[i]->qs + 32 * h, 2 * k, i, o);
      pack_bits(blk[i]->hmask, u, i, o + 128);
    }
  }
}

void unpack_q3_K(const uint8_t* in, int i, block_q3_K* blk) {
  std::memcpy(&blk->d, in + 2 * i, 2);
  get_row_bytes(in + 2 * kPanelRows, 12, i, blk->scales);
  std::memset(blk->qs, 0, sizeof(blk->qs));  // every bit of qs and hmask is or'ed in below
  std::memset(blk->hmask, 0, sizeof(blk->hmask));
  for (int u = 0; u < 8; ++u) {
    const uint8_t* o = in + kQ3KHead + kQ3KUnit * u;
    unpack_fields2(o, i, 2 * (u % 4), blk->qs + 32 * (u / 4));
    unpack_bits(o + 128, i, u, blk->hmask);
  }
}

// Q2_K: one panel super-block per 256 elements (the layout in panel.h). Element l (0..31) of unit
// u = 4h + k of a file block: 2 bits at bit 2k of qs[32h + l] (ggml's dequantize_row_q2_K), the
// same fields as Q3_K's low bits.
constexpr size_t kQ2KHead = 4 * kPanelRows + 16 * kPanelRows;  // d, dmin, transposed scale bytes: 320 B
constexpr size_t kQ2KUnit = 2 * 64;                             // 2 two-bit vectors
static_assert(kQ2KHead + 8 * kQ2KUnit == kPanelRows * sizeof(block_q2_K), "a Q2_K panel super-block is its rows' bytes");

void pack_q2_K(const uint8_t* rows, size_t row_stride, int64_t sb, uint8_t* out) {
  const block_q2_K* blk[kPanelRows];
  row_blocks(rows, row_stride, sb, blk);
  for (int i = 0; i < kPanelRows; ++i) {
    std::memcpy(out + 2 * i, &blk[i]->d, 2);
    std::memcpy(out + 2 * (kPanelRows + i), &blk[i]->dmin, 2);
    put_row_bytes(blk[i]->scales, 16, i, out + 4 * kPanelRows);
  }
  for (int u = 0; u < 8; ++u)
    for (int i = 0; i < kPanelRows; ++i) pack_fields2(blk[i]->qs + 32 * (u / 4), 2 * (u % 4), i, out + kQ2KHead + kQ2KUnit * u);
}

void unpack_q2_K(const uint8_t* in, int i, block_q2_K* blk) {
  std::memcpy(&blk->d, in + 2 * i, 2);
  std::memcpy(&blk->dmin, in + 2 * (kPanelRows + i), 2);
  get_row_bytes(in + 4 * kPanelRows, 16, i, blk->scales);
  std::memset(blk->qs, 0, sizeof(blk->qs));  // every bit of qs is or'ed in below
  for (int u = 0; u < 8; ++u) unpack_fields2(in + kQ2KHead + kQ2KUnit * u, i, 2 * (u % 4), blk->qs + 32 * (u / 4));
}

// IQ4_XS: one panel super-block per 256 elements: d[16] (fp16), scales_h[16] (uint16), scales_l
// as 4 x 16 bytes (byte k of each row together), then unit u's 4 Q4 vectors (its IQ4_NL-style
// nibbles, qs + 16 u) at 128 + 256 u.
constexpr size_t kIq4XsHead = 2 * kPanelRows + 2 * kPanelRows + 4 * kPanelRows;
static_assert(kIq4XsHead + 8 * 256 == kPanelRows * sizeof(block_iq4_xs), "an IQ4_XS panel super-block is its rows' bytes");

void pack_iq4_xs(const uint8_t* rows, size_t row_stride, int64_t sb, uint8_t* out) {
  const block_iq4_xs* blk[kPanelRows];
  row_blocks(rows, row_stride, sb, blk);
  for (int i = 0; i < kPanelRows; ++i) {
    std::memcpy(out + 2 * i, &blk[i]->d, 2);
    std::memcpy(out + 2 * (kPanelRows + i), &blk[i]->scales_h, 2);
    put_row_bytes(blk[i]->scales_l, 4, i, out + 4 * kPanelRows);
  }
  for (int u = 0; u < 8; ++u) {
    const uint8_t* qs[kPanelRows];
    for (int i = 0; i < kPanelRows; ++i) qs[i] = blk[i]->qs + 16 * u;
    pack_q4(qs, out + kIq4XsHead + 256 * u);
  }
}

void unpack_iq4_xs(const uint8_t* in, int i, block_iq4_xs* blk) {
  std::memcpy(&blk->d, in + 2 * i, 2);
  std::memcpy(&blk->scales_h, in + 2 * (kPanelRows + i), 2);
  get_row_bytes(in + 4 * kPanelRows, 4, i, blk->scales_l);
  for (int u = 0; u < 8; ++u) unpack_q4(in + kIq4XsHead + 256 * u, i, blk->qs + 16 * u);
}

}  // namespace

size_t panel_block_bytes(TensorType t) {
  switch (t) {
    case TensorType::Q4_0: return kPanelRows * sizeof(block_q4_0);
    case TensorType::Q4_1: return kPanelRows * sizeof(block_q4_1);
    case TensorType::Q8_0: return kPanelRows * sizeof(block_q8_0);
    case TensorType::Q4_K: return kPanelRows * sizeof(block_q4_K) / 8;  // a super-block is 8 such blocks
    case TensorType::Q6_K: return kPanelRows * sizeof(block_q6_K) / 8;
    case TensorType::Q5_K: return kPanelRows * sizeof(block_q5_K) / 8;
    case TensorType::IQ4_NL: return kPanelRows * sizeof(block_iq4_nl);
    case TensorType::Q3_K: return kPanelRows * sizeof(block_q3_K) / 8;
    case TensorType::Q2_K: return kPanelRows * sizeof(block_q2_K) / 8;
    case TensorType::IQ4_XS: return kPanelRows * sizeof(block_iq4_xs) / 8;
    default: return 0;
  }
}

void pack_panel(TensorType t, const uint8_t* rows, size_t row_stride, int64_t n, uint8_t* dst) {
  if (t == TensorType::Q4_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      pack_k4<block_q4_K>(rows, row_stride, sb, dst + size_t(sb) * kPanelRows * sizeof(block_q4_K));
    return;
  }
  if (t == TensorType::Q5_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      pack_k4<block_q5_K>(rows, row_stride, sb, dst + size_t(sb) * kPanelRows * sizeof(block_q5_K));
    return;
  }
  if (t == TensorType::Q6_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb) pack_q6_K(rows, row_stride, sb, dst + size_t(sb) * kPanelRows * sizeof(block_q6_K));
    return;
  }
  if (t == TensorType::IQ4_XS) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      pack_iq4_xs(rows, row_stride, sb, dst + size_t(sb) * kPanelRows * sizeof(block_iq4_xs));
    return;
  }
  if (t == TensorType::Q3_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb) pack_q3_K(rows, row_stride, sb, dst + size_t(sb) * kPanelRows * sizeof(block_q3_K));
    return;
  }
  if (t == TensorType::Q2_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb) pack_q2_K(rows, row_stride, sb, dst + size_t(sb) * kPanelRows * sizeof(block_q2_K));
    return;
  }
  const int64_t nb = n / kBlock;
  const size_t pbb = panel_block_bytes(t);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = dst + size_t(b) * pbb;
    const uint8_t* qs[kPanelRows];
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    switch (t) {
      case TensorType::Q4_0:
      case TensorType::IQ4_NL:  // Q4_0's block layout (kIq4Like): d, then the nibbles in the same order
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
            store4(out + 32 + g * 64 + 4 * i, load4(reinterpret_cast<const uint8_t*>(blk->qs) + 4 * g) ^ 0x80808080u);
        }
        break;
      default: return;
    }
  }
}

void unpack_panel_row(TensorType t, const uint8_t* panel, int64_t n, int i, uint8_t* dst_row) {
  if (t == TensorType::Q4_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      unpack_k4(panel + size_t(sb) * kPanelRows * sizeof(block_q4_K), i, reinterpret_cast<block_q4_K*>(dst_row) + sb);
    return;
  }
  if (t == TensorType::Q5_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      unpack_k4(panel + size_t(sb) * kPanelRows * sizeof(block_q5_K), i, reinterpret_cast<block_q5_K*>(dst_row) + sb);
    return;
  }
  if (t == TensorType::Q6_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      unpack_q6_K(panel + size_t(sb) * kPanelRows * sizeof(block_q6_K), i, reinterpret_cast<block_q6_K*>(dst_row) + sb);
    return;
  }
  if (t == TensorType::IQ4_XS) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      unpack_iq4_xs(panel + size_t(sb) * kPanelRows * sizeof(block_iq4_xs), i, reinterpret_cast<block_iq4_xs*>(dst_row) + sb);
    return;
  }
  if (t == TensorType::Q3_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      unpack_q3_K(panel + size_t(sb) * kPanelRows * sizeof(block_q3_K), i, reinterpret_cast<block_q3_K*>(dst_row) + sb);
    return;
  }
  if (t == TensorType::Q2_K) {
    for (int64_t sb = 0; sb < n / 256; ++sb)
      unpack_q2_K(panel + size_t(sb) * kPanelRows * sizeof(block_q2_K), i, reinterpret_cast<block_q2_K*>(dst_row) + sb);
    return;
  }
  const int64_t nb = n / kBlock;
  const size_t pbb = panel_block_bytes(t);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* in = panel + size_t(b) * pbb;
    switch (t) {
      case TensorType::Q4_0:
      case TensorType::IQ4_NL: {  // Q4_0's block layout
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
