// Scratch memory of one forward step on the CPU: the named activations (model/layer_ops.h)
// for up to `rows` rows, the quantised activations, the per-row tables, the split attention
// states and matmul's per-thread unpacking tiles. Owned by an engine lane and shared by every
// session stepped there; it only grows (at a step larger than any before), so steady-state
// steps allocate nothing.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/matmul.h"
#include "base/aligned_buffer.h"
#include "kernels/kv_format.h"
#include "model/config.h"
#include "model/kv_cache.h"

namespace pllm {

struct StepScratch {
  // Room for `rows` rows of a model with config c, `gathered` of them producing logits
  // through the gather buffer (multi-sequence steps), on a pool of `threads` threads. Grows only.
  void reserve(const ModelConfig& c, int rows, int gathered, int threads);

  // Decode rows' attention split over the visible positions: [decode row][kv head][part][query
  // head of the group] partial states (grown to the step's decode rows when attention runs).
  static constexpr int kMaxAttnParts = 8;
  AlignedBuffer<AttnAccum> attn_parts;

  AlignedBuffer<float> x;        // [rows][n_embd] residual stream
  AlignedBuffer<float> h;        // [rows][n_embd] normed input of a block
  AlignedBuffer<float> q;        // [rows][q_dim]
  AlignedBuffer<float> k;        // [rows][kv_dim]
  AlignedBuffer<float> v;        // [rows][kv_dim]
  AlignedBuffer<float> att;      // [rows][q_dim] attention output
  AlignedBuffer<float> gate;     // [rows][n_ff] (the widest layer's n_ff)
  AlignedBuffer<float> up;       // [rows][n_ff]
  AlignedBuffer<float> proj;     // [rows][n_embd] output of wo / w_down
  AlignedBuffer<float> ple;      // [rows][n_layer * n_embd_per_layer] Gemma 4's per-layer inputs (else empty)
  AlignedBuffer<uint8_t> act_q;  // [kMaxActFormats][rows][act_row_stride] quantised activations
  AlignedBuffer<float> logits;   // [out_rows][n_vocab]: logits of several sequences before they are handed out
  AlignedBuffer<uint8_t> unpack_tiles;  // [threads][kUnpackTileBytes]: matmul's panel unpacking
  MatmulScratch mm{};            // view of act_q and unpack_tiles for matmul()

  // Per row of the step: its sequence's cache, position and token.
  std::vector<KvCache*> row_kv;
  std::vector<int> row_pos;
  std::vector<int32_t> row_token;
  std::vector<int> out_rows;  // rows whose logits are wanted, in output order
  std::vector<int> row_last;                // the last position the row attends to (its own, or its step's last: bidirectional)
  std::vector<const float*> row_embd;       // the row's embedding (SeqStep::embeddings), or null: look the token up
  std::vector<uint8_t> row_decode;  // computed as a one-row decode step (SeqStep::as_decode_steps, or one row)
  std::vector<int> attn_tiles;      // first row of each attention tile of prompt rows
  std::vector<int> attn_tile_end;   // ... and the row after its last
  std::vector<int> split_row;       // the decode rows, in order
  std::vector<int> split_parts;     // ... their attention parts
  std::vector<int> split_first;     // ... the index of their first (row, kv head, part) task

  int rows_cap = 0, out_cap = 0, threads_cap = 0;
  int n_embd = 0, q_dim = 0, kv_dim = 0, n_ff = 0, n_head = 0, n_vocab = 0, ple_dim = 0;
};

}  // namespace pllm
