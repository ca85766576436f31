#include "vision/encoder.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/matmul.h"
#include "base/aligned_buffer.h"
#include "kernels/kernels.h"
#include "kernels/ops_f32.h"

namespace pllm::vision {

namespace {

// sum over i of f(x[i]) in double, as 8 interleaved partial sums added pairwise at the end: one
// dependent chain of double adds made each norm wait on the adder's latency (a norm cost as much
// as a third of the ViT-Tiny encoder's products); 8 chains the compiler turns into vectors.
template <class F>
double sum8(const float* x, int64_t n, F f) {
  double s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += f(x[i + j]);
  for (int j = 0; i < n; ++i, ++j) s[j] += f(x[i]);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

}  // namespace

void layernorm_f32(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  // double sums: ggml accumulates these in double too
  const float mean = float(sum8(x, n, [](float v) { return double(v); }) / double(n));
  const double ss = sum8(x, n, [mean](float v) {
    const float d = v - mean;
    return double(d) * d;
  });
  const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
  for (int64_t i = 0; i < n; ++i) {
    float v = (x[i] - mean) * scale;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

void gelu_f32(float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + 0.044715f * v * v)));
  }
}

namespace {

// Rows per matmul call: bounds the quantised-activation scratch (kMaxActFormats x rows x the
// widest row) whatever the patch count. 256 is more than the engine's prompt chunks (n_batch
// 64), so the products take the same prompt paths they take there.
constexpr int kRowsPerCall = 256;

class Products {
 public:
  // panels: some matrix is held as panels (a mode that does not read them unpacks tiles).
  Products(int64_t max_cols, ThreadPool& pool, ActMode act, bool panels) : pool_(pool), act_(act) {
    stride_ = max_act_row_bytes(max_cols);
    buf_.resize(size_t(kMaxActFormats) * kRowsPerCall * stride_, false);
    s_.act_q = buf_.data();
    s_.act_row_stride = stride_;
    s_.n_batch = kRowsPerCall;
    if (panels) {
      unpack_.resize(size_t(pool.size()) * kUnpackTileBytes, false);
      s_.unpack_tiles = unpack_.data();
      s_.n_unpack_tiles = pool.size();
    }
  }
  // Y[n][W.rows] = X[n][W.cols] . W^T (+ bias per column when given).
  void run(const Matrix& W, const float* X, int n, float* Y, const float* bias = nullptr) {
    run_group({{&W, Y}}, X, n);
    if (bias)
      pool_.run_spread(n, [&](int64_t t) { add_f32(Y + t * W.rows, bias, W.rows); });
  }
  // Several products of the same X ([n][cols], one cols) as one job: Q, K and V. At most
  // kMaxActFormats of them (matmul_group's limit: one activation format per target).
  void run_group(std::initializer_list<MatmulTarget> targets, const float* X, int n) {
    assert(targets.size() <= size_t(kMaxActFormats));
    for (int r0 = 0; r0 < n; r0 += kRowsPerCall) {
      const int rows = std::min(kRowsPerCall, n - r0);
      MatmulTarget at[kMaxActFormats];
      int na = 0;
      for (const MatmulTarget& t : targets) at[na++] = {t.W, t.Y + int64_t(r0) * t.W->rows};
      matmul_group({at, size_t(na)}, X + int64_t(r0) * targets.begin()->W->cols, rows, act_, s_, pool_);
    }
  }

 private:
  ThreadPool& pool_;
  ActMode act_;
  size_t stride_ = 0;
  AlignedBuffer<uint8_t> buf_, unpack_;
  MatmulScratch s_{};
};

// Softmax attention, every head, on the KV cache's attention kernel (KernelTable::attn_seg_f32:
// online softmax over f32 keys and values read in place, E floats apart): up to 16 queries of
// one head per call, so each key and value row is loaded once for all of them, as for the query
// heads of a grouped-query layer. Tasks are (head, block of 16 queries). The kernel takes head
// sizes that are multiples of 16 (ViT-Tiny's and SmolVLM's 64); others take attention_products.
// ViT-Tiny (196 patches, 3 heads of 64), Q8_0, 2 threads, Zen 4, medians of 7 alternated: int8
// encode 46 -> 25 ms, exact 57-60 -> 43-47 ms (the products and a scalar softmax before).
constexpr int kQueriesPerCall = 16;

bool attention_by_kernel(int d_head) { return d_head % 16 == 0 && d_head <= kMaxHeadDim; }

void attention_kernel(const float* q, const float* k, const float* v, float* out, int n, int n_head, int d_head,
                      ThreadPool& pool) {
  const int E = n_head * d_head, blocks = (n + kQueriesPerCall - 1) / kQueriesPerCall;
  const AttnScore score(1.0f / std::sqrt(float(d_head)));
  const auto seg = kernels().attn_seg_f32;
  pool.run_spread(int64_t(n_head) * blocks, [&](int64_t task) {
    const int h = int(task / blocks), i0 = int(task % blocks) * kQueriesPerCall;
    const int nq = std::min(kQueriesPerCall, n - i0);
    std::vector<AttnAccum> acc(static_cast<size_t>(nq));
    std::vector<float> qb(size_t(nq) * size_t(d_head));
    for (int j = 0; j < nq; ++j) {
      std::copy_n(q + int64_t(i0 + j) * E + int64_t(h) * d_head, d_head, qb.data() + int64_t(j) * d_head);
      attn_accum_init(acc[size_t(j)], d_head);
    }
    seg(qb.data(), nq, k + int64_t(h) * d_head, v + int64_t(h) * d_head, E, n, d_head, score, acc.data());
    for (int j = 0; j < nq; ++j) attn_accum_finish(acc[size_t(j)], d_head, out + int64_t(i0 + j) * E + int64_t(h) * d_head);
  });
}

// Softmax attention, every head: per head scores = Q_h K_h^T and out = P V_h as F32 products on
// the matmul (its SIMD kernels), queries in blocks of kRowsPerCall so the score block stays
// [256][n] however many patches. q, k, v, out: [n][E].
void attention_products(const float* q, const float* k, const float* v, float* out, int n, int n_head, int d_head,
                        Products& prod, ThreadPool& pool) {
  const int E = n_head * d_head;
  const float scale = 1.0f / std::sqrt(float(d_head));
  std::vector<float> qh(size_t(n) * size_t(d_head)), vt(size_t(d_head) * size_t(n));
  std::vector<float> sc(size_t(std::min(n, kRowsPerCall)) * size_t(n)), oh(size_t(n) * size_t(d_head));
  for (int h = 0; h < n_head; ++h) {
    // K_h in place: n rows of d_head floats, E floats apart.
    Matrix kh;
    kh.name = "attn.k";
    kh.data = reinterpret_cast<const uint8_t*>(k + size_t(h) * size_t(d_head));
    kh.type = TensorType::F32;
    kh.rows = n;
    kh.cols = d_head;
    kh.row_bytes = size_t(E) * sizeof(float);
    // V_h transposed ([d_head][n]) so that P V_h is a product of the same form.
    Matrix vh = kh;
    vh.name = "attn.v";
    vh.data = reinterpret_cast<const uint8_t*>(vt.data());
    vh.rows = d_head;
    vh.cols = n;
    vh.row_bytes = size_t(n) * sizeof(float);
    pool.run_spread(n, [&](int64_t i) {
      std::copy_n(q + i * E + h * d_head, d_head, qh.data() + i * d_head);
      for (int d = 0; d < d_head; ++d) vt[size_t(d) * size_t(n) + size_t(i)] = v[i * E + h * d_head + d];
    });
    for (int i0 = 0; i0 < n; i0 += kRowsPerCall) {
      const int rows = std::min(kRowsPerCall, n - i0);
      prod.run(kh, qh.data() + size_t(i0) * size_t(d_head), rows, sc.data());
      pool.run_spread(rows, [&](int64_t r) {
        float* s = sc.data() + r * n;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) mx = std::max(mx, s[j] * scale);
        double sum = 0.0;
        for (int j = 0; j < n; ++j) {
          s[j] = std::exp(s[j] * scale - mx);
          sum += s[j];
        }
        const float inv = float(1.0 / sum);
        for (int j = 0; j < n; ++j) s[j] *= inv;
      });
      prod.run(vh, sc.data(), rows, oh.data() + size_t(i0) * size_t(d_head));
    }
    pool.run_spread(n, [&](int64_t i) { std::copy_n(oh.data() + i * d_head, d_head, out + i * E + h * d_head); });
  }
}

// Patch (px, py) of the image as one row, in the conv kernel's order (channel, y, x).
void gather_patch(const ImageF32& img, int P, int px, int py, float* row) {
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < P; ++y) {
      const float* src = img.px.data() + ((size_t(py) * P + size_t(y)) * size_t(img.width) + size_t(px) * P) * 3 + c;
      for (int x = 0; x < P; ++x) *row++ = src[size_t(x) * 3];
    }
}

}  // namespace

Result<int> output_tokens(const VisionModel& m, const ImageF32& img) {
  const VisionHparams& hp = m.hp;
  if (img.width != hp.image_size || img.height != hp.image_size ||
      img.px.size() != size_t(img.width) * size_t(img.height) * 3)
    return make_error(Status::invalid_argument, "vision: the encoder takes " + std::to_string(hp.image_size) + "x" +
                                                    std::to_string(hp.image_size) + " images, got " +
                                                    std::to_string(img.width) + "x" + std::to_string(img.height));
  return hp.tokens_per_image();
}

Result<std::vector<float>> encode_image(const VisionModel& m, const ImageF32& img, ThreadPool& pool,
                                        const EncodeOptions& opt) {
  PLLM_ASSIGN(const int n_tok, output_tokens(m, img));
  const VisionHparams& hp = m.hp;
  const int E = hp.n_embd, F = hp.n_ff, P = hp.patch_size, side = hp.patches_per_side(), n = hp.n_patches();
  const int in_patch = 3 * P * P;
  const int64_t merged_cols = int64_t(E) * hp.n_merge * hp.n_merge;
  Products prod(std::max<int64_t>({in_patch, E, F, merged_cols, n}), pool, opt.act, m.repacked_tensors > 0);

  // The patch embedding as a product with an F32 matrix over the decoded conv kernel.
  Matrix patch;
  patch.name = "v.patch_embd.weight";
  patch.data = reinterpret_cast<const uint8_t*>(m.patch_w.data());
  patch.type = TensorType::F32;
  patch.rows = E;
  patch.cols = in_patch;
  patch.row_bytes = size_t(in_patch) * sizeof(float);
  std::vector<float> rows(size_t(n) * size_t(in_patch));
  pool.run_spread(n, [&](int64_t p) { gather_patch(img, P, int(p % side), int(p / side), rows.data() + p * in_patch); });
  std::vector<float> x(size_t(n) * size_t(E));
  prod.run(patch, rows.data(), n, x.data(), m.patch_b.data());
  rows = {};
  pool.run_spread(n, [&](int64_t p) { add_f32(x.data() + p * E, m.pos_embd.data() + p * E, E); });

  // One arena for the layer activations (written before read: not zeroed, no page touched twice
  // by a fresh allocation per buffer). h holds a norm's output, then a product's.
  const size_t NE = size_t(n) * size_t(E);
  AlignedBuffer<float> arena(5 * NE + size_t(n) * size_t(F), /*zero=*/false);
  float* const h = arena.data();
  float *const q = h + NE, *const k = q + NE, *const v = k + NE, *const a = v + NE, *const ff = a + NE;
  // GELU through the kernel table's GeGLU (its SIMD exp; scalar twin expf) against ones: the
  // tanh form, and multiplying by 1 is exact. gelu_f32 (libm tanh) cost a sixth of the encoder.
  const std::vector<float> ones(size_t(F), 1.0f);
  const auto geglu = kernels().geglu_f32;
  // The residual adds, biases and norms between products are fused into one pass over the rows
  // each (x += h + bias, then the next norm): a layer is 9 jobs for the pool, not 18 (a product
  // counted as one).
  auto residual_then_norm = [&](const float* bias, const float* ln_w, const float* ln_b, float* dst) {
    pool.run_spread(n, [&](int64_t t) {
      float* xr = x.data() + t * E;
      add_f32(xr, h + t * E, E);
      if (bias) add_f32(xr, bias, E);
      layernorm_f32(xr, ln_w, ln_b, dst + t * E, E, hp.eps);
    });
  };
  pool.run_spread(n, [&](int64_t t) {
    layernorm_f32(x.data() + t * E, m.layers[0].ln1_w, m.layers[0].ln1_b, h + t * E, E, hp.eps);
  });
  for (size_t il = 0; il < m.layers.size(); ++il) {
    const VisionLayer& L = m.layers[il];
    prod.run_group({{&L.q, q}, {&L.k, k}, {&L.v, v}}, h, n);
    if (L.q_b || L.k_b || L.v_b)
      pool.run_spread(n, [&](int64_t t) {
        if (L.q_b) add_f32(q + t * E, L.q_b, E);
        if (L.k_b) add_f32(k + t * E, L.k_b, E);
        if (L.v_b) add_f32(v + t * E, L.v_b, E);
      });
    if (attention_by_kernel(E / hp.n_head))
      attention_kernel(q, k, v, a, n, hp.n_head, E / hp.n_head, pool);
    else
      attention_products(q, k, v, a, n, hp.n_head, E / hp.n_head, prod, pool);
    prod.run(L.o, a, n, h);
    residual_then_norm(L.o_b, L.ln2_w, L.ln2_b, h);
    prod.run(L.up, h, n, ff);
    pool.run_spread(n, [&](int64_t t) {
      float* fr = ff + t * F;
      if (L.up_b) add_f32(fr, L.up_b, F);
      geglu(fr, ones.data(), fr, F);
    });
    prod.run(L.down, ff, n, h);
    // Then the next layer's first norm, or after the last layer the post-norm, in place.
    const bool last = il + 1 == m.layers.size();
    residual_then_norm(L.down_b, last ? m.post_ln_w : m.layers[il + 1].ln1_w,
                       last ? m.post_ln_b : m.layers[il + 1].ln1_b, last ? x.data() : h);
  }

  std::vector<float> out(size_t(n_tok) * size_t(hp.n_out));
  const int s = hp.n_merge;
  if (hp.projector == Projector::idefics3) {
    // Pixel shuffle: each s x s block of patches becomes one token of E * s * s features, ordered
    // (row in block, column in block, channel). The loader checks that s divides the grid.
    const int gs = side / s;
    std::vector<float> merged(size_t(n_tok) * size_t(merged_cols));
    for (int by = 0; by < gs; ++by)
      for (int bx = 0; bx < gs; ++bx) {
        float* dst = merged.data() + (int64_t(by) * gs + bx) * merged_cols;
        for (int dy = 0; dy < s; ++dy)
          for (int dx = 0; dx < s; ++dx)
            std::copy_n(x.data() + (int64_t(by * s + dy) * side + bx * s + dx) * E, E, dst + (int64_t(dy) * s + dx) * E);
      }
    prod.run(m.mm_fc, merged.data(), n_tok, out.data());
  } else {
    // Average pool s x s (stride s), RMS norm, projection.
    const int gs = side / s;
    std::vector<float> pooled(size_t(n_tok) * size_t(E), 0.0f);
    const float inv = 1.0f / float(s * s);
    pool.run_spread(n_tok, [&](int64_t t) {
      const int by = int(t / gs), bx = int(t % gs);
      float* dst = pooled.data() + t * E;
      for (int e = 0; e < E; ++e) {
        float acc = 0.0f;
        for (int dy = 0; dy < s; ++dy)
          for (int dx = 0; dx < s; ++dx) acc += x[(size_t(by * s + dy) * size_t(side) + size_t(bx * s + dx)) * size_t(E) + size_t(e)];
        dst[e] = acc * inv;
      }
      rmsnorm_f32(dst, m.soft_emb_norm_w, dst, E, hp.eps);
    });
    prod.run(m.mm_proj, pooled.data(), n_tok, out.data());
  }
  return out;
}

Result<std::vector<float>> encode_images(const VisionModel& m, const Preprocessed& pre, ThreadPool& pool,
                                         const EncodeOptions& opt) {
  std::vector<float> all;
  for (const ImageF32& img : pre.images) {
    PLLM_ASSIGN(std::vector<float> e, encode_image(m, img, pool, opt));
    all.insert(all.end(), e.begin(), e.end());
  }
  return all;
}

}  // namespace pllm::vision
