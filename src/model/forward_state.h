// Everything a forward pass mutates: the KV cache and scratch for one batch of tokens.
// Owned by a session; sized once at creation so steady-state decoding allocates nothing.
#pragma once
#include <atomic>
#include <cstdint>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/matmul.h"

namespace pllm {

struct ForwardState {
  // n_ctx: positions without a window; n_batch: the most tokens one forward() call may take.
  ForwardState(const ModelConfig& cfg, int n_ctx, int n_batch, ThreadPool& pool, ActMode act_mode,
               const KvOptions& kv_options);

  int n_ctx;
  int n_batch;
  int kv_dim;
  int head_dim;
  ThreadPool* pool;  // the session's pool; a background pool while pre-warming
  ActMode act_mode;
  bool fuse = true;  // group Q/K/V and gate/up into one pool job each (off: --no-fuse)
  const std::atomic<bool>* cancel = nullptr;  // checked between layers
  Tracer* tracer = nullptr;                   // op timing when profiling, else null

  KvCache kv;  // keys and values of every layer (model/kv_cache.h)
  // Decode attention split over the visible positions: [n_head][kMaxAttnParts] partial states.
  static constexpr int kMaxAttnParts = 8;
  AlignedBuffer<AttnAccum> attn_parts;

  AlignedBuffer<float> x;       // [n_batch][n_embd] residual stream
  AlignedBuffer<float> h;       // [n_batch][n_embd] normed input of a block
  AlignedBuffer<float> q;       // [n_batch][q_dim]
  AlignedBuffer<float> k;       // [n_batch][kv_dim]
  AlignedBuffer<float> v;       // [n_batch][kv_dim]
  AlignedBuffer<float> att;     // [n_batch][q_dim] attention output
  AlignedBuffer<float> gate;    // [n_batch][n_ff] (the widest layer's n_ff)
  AlignedBuffer<float> up;      // [n_batch][n_ff]
  AlignedBuffer<float> proj;    // [n_batch][n_embd] output of wo / w_down
  AlignedBuffer<uint8_t> act_q;  // [kMaxActFormats][n_batch][act_row_stride] quantised activations
  MatmulScratch mm{};            // view of act_q for matmul()
};

}  // namespace pllm
