// The Vulkan backend's non-matmul ops (backends/vulkan/vk_ops.h) against their CPU twins, on
// whatever Vulkan device the machine has (a CPU device such as lavapipe is accepted):
//  * rmsnorm, add_bias, residual, rope, glu: normalised mean squared error
//    sum((y - ref)^2) / sum(ref^2) <= 1e-7 against rmsnorm_f32, add_f32, what
//    CpuLayers::residual does, rope_angles + rope_apply, swiglu_f32 and geglu_f32;
//  * kv_store: the device mirror equals the CPU KvCache's bytes (export_prefix) for f32, f16
//    and q8, with values chosen to hit every rounding case (half ties, half subnormals and
//    overflow, q8 codes whose x / scale lies next to a .5 boundary, subnormal q8 scales);
//  * attention: NMSE <= 5e-4 against KvCache::attend_part (then acc / l) over a cache filled
//    with the same rows the device mirror got through kv_store: f32, f16, q8; window 0 and 5;
//    GQA 1 and 3; head_dim 64 and 256; decode at 0, 1, 70, 300 and a 17-row prefill at 40.
// Every case runs with and without the fp16 shader variants, and once more under the
// Khronos validation layer, which must report nothing. The NMSE figures are printed.
#include <gtest/gtest.h>

#if PLLM_HAVE_VULKAN

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/vulkan/vk_ops.h"
#include "kernels/kernels.h"
#include "kernels/kv_format.h"
#include "kernels/ops_f32.h"
#include "model/kv_cache.h"

namespace pllm {
namespace {

using vk::KvFormat;

// Setup failures past Context::create are bugs, not missing hardware: stop loudly.
template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
    std::abort();
  }
  return std::move(r).value();
}
void must(Result<void> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
    std::abort();
  }
}

struct Dev {
  std::unique_ptr<vk::Context> ctx;
  std::unique_ptr<vk::OpKernels> ops;
  std::unique_ptr<vk::Recorder> rec;

  // "" or why there is no device.
  std::string open(bool disable_f16, bool validation) {
    vk::ContextOptions o;
    o.allow_cpu_device = true;
    o.disable_f16 = disable_f16;
    o.validation = validation;
    auto c = vk::Context::create(o);
    if (!c.ok()) return c.error().message;
    ctx = std::move(c).value();
    ops = must(vk::OpKernels::create(*ctx), "OpKernels::create");
    rec = must(vk::Recorder::create(*ctx), "Recorder::create");
    return "";
  }
  vk::Buffer buffer(size_t bytes) { return must(ctx->buffer(bytes, vk::Mem::device), "buffer"); }
  template <class T>
  vk::Buffer upload(const std::vector<T>& x, size_t min_bytes = 0) {
    vk::Buffer b = buffer(std::max(x.size() * sizeof(T), min_bytes));
    must(ctx->upload(b, 0, x.data(), x.size() * sizeof(T)), "upload");
    return b;
  }
  // Records what f records, submits and waits.
  template <class F>
  void run(F&& f) {
    must(rec->begin(), "begin");
    f(*rec);
    must(rec->submit(), "submit");
  }
  // The first `bytes` of a device buffer, through a host buffer (device memory need not be mappable).
  std::vector<uint8_t> read_bytes(const vk::Buffer& b, size_t bytes) {
    vk::Buffer host = must(ctx->buffer(bytes, vk::Mem::host), "host buffer");
    run([&](vk::Recorder& r) { r.copy(vk::view(b, 0, bytes), vk::view(host)); });
    const auto* p = static_cast<const uint8_t*>(host.mapped());
    return std::vector<uint8_t>(p, p + bytes);
  }
  std::vector<float> read(const vk::Buffer& b, size_t count) {
    const std::vector<uint8_t> raw = read_bytes(b, count * 4);
    std::vector<float> y(count);
    std::memcpy(y.data(), raw.data(), count * 4);
    return y;
  }
};

double nmse(const std::vector<float>& y, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(y[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0 ? num / den : num;
}

std::vector<float> randn(std::mt19937& rng, size_t n, float sigma = 1.0f) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

constexpr double kElementwiseBound = 1e-7;
constexpr double kAttentionBound = 5e-4;

void check(const char* what, const std::vector<float>& y, const std::vector<float>& ref, double bound) {
  const double e = nmse(y, ref);
  std::printf("[ nmse ] %-34s %.3g\n", what, e);
  EXPECT_LE(e, bound) << what;
}

// ---- elementwise ops ----

void run_elementwise(Dev& d) {
  std::mt19937 rng(7);
  const int n = 5, width = 640;  // not a multiple of the 256-wide workgroups
  const float eps = 1e-6f;
  const std::vector<float> x = randn(rng, size_t(n) * width, 3.0f), w = randn(rng, width);
  {  // rmsnorm, out-of-place
    vk::Buffer bx = d.upload(x), bw = d.upload(w), by = d.buffer(x.size() * 4);
    d.run([&](vk::Recorder& r) { d.ops->rmsnorm(r, vk::view(bx), vk::view(bw), vk::view(by), n, width, eps); });
    std::vector<float> ref(x.size());
    for (int r = 0; r < n; ++r) rmsnorm_f32(&x[size_t(r) * width], w.data(), &ref[size_t(r) * width], width, eps);
    check("rmsnorm", d.read(by, x.size()), ref, kElementwiseBound);
  }
  {  // per-head q/k norm in place: n rows * 10 heads of 64
    const int heads = 10, hd = 64;
    const std::vector<float> qk = randn(rng, size_t(n) * heads * hd, 2.0f), wh = randn(rng, hd);
    vk::Buffer bq = d.upload(qk), bw = d.upload(wh);
    d.run([&](vk::Recorder& r) { d.ops->rmsnorm(r, vk::view(bq), vk::view(bw), vk::view(bq), n * heads, hd, eps); });
    std::vector<float> ref = qk;
    for (int r = 0; r < n * heads; ++r) rmsnorm_f32(&ref[size_t(r) * hd], wh.data(), &ref[size_t(r) * hd], hd, eps);
    check("rmsnorm per head, in place", d.read(bq, qk.size()), ref, kElementwiseBound);
  }
  {  // add_bias
    vk::Buffer bx = d.upload(x), bb = d.upload(w);
    d.run([&](vk::Recorder& r) { d.ops->add_bias(r, vk::view(bx), vk::view(bb), n, width); });
    std::vector<float> ref = x;
    for (int r = 0; r < n; ++r) add_f32(&ref[size_t(r) * width], w.data(), width);
    check("add_bias", d.read(bx, x.size()), ref, kElementwiseBound);
  }
  // residual: CpuLayers::residual's steps (from += bias; from = rmsnorm(from) * post_norm; x += from).
  const std::vector<float> from = randn(rng, x.size(), 0.5f), bias = randn(rng, width, 0.1f), pn = randn(rng, width);
  for (int mode = 0; mode < 4; ++mode) {
    const bool with_bias = mode & 1, with_norm = mode & 2;
    vk::Buffer bx = d.upload(x), bf = d.upload(from), bb = d.upload(bias), bn = d.upload(pn);
    d.run([&](vk::Recorder& r) {
      d.ops->residual(r, vk::view(bx), vk::view(bf), with_bias ? vk::view(bb) : vk::View{},
                      with_norm ? vk::view(bn) : vk::View{}, n, width, eps);
    });
    std::vector<float> ref = x, y = from;
    for (int r = 0; r < n; ++r) {
      float* yr = &y[size_t(r) * width];
      if (with_bias) add_f32(yr, bias.data(), width);
      if (with_norm) rmsnorm_f32(yr, pn.data(), yr, width, eps);
    }
    add_f32(ref.data(), y.data(), int64_t(ref.size()));
    const std::string name = std::string("residual") + (with_bias ? " +bias" : "") + (with_norm ? " +post_norm" : "");
    check(name.c_str(), d.read(bx, x.size()), ref, kElementwiseBound);
  }
  // rope: full and partial rotation, both pair orders; positions up to 40000.
  {
    const int heads = 9, hd = 64;
    const std::vector<double> pos = {0, 1, 17, 1000, 40000};
    for (int n_rot : {64, 32})
      for (bool neox : {false, true}) {
        std::vector<float> inv_freq(size_t(n_rot / 2)), cs(pos.size() * size_t(n_rot));
        for (int i = 0; i < n_rot / 2; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(n_rot));
        for (size_t r = 0; r < pos.size(); ++r) rope_angles(n_rot, inv_freq.data(), pos[r], &cs[r * size_t(n_rot)]);
        const int rows = int(pos.size());
        const std::vector<float> q = randn(rng, size_t(rows) * heads * hd);
        vk::Buffer bq = d.upload(q), bc = d.upload(cs);
        d.run([&](vk::Recorder& r) { d.ops->rope(r, vk::view(bq), vk::view(bc), rows, heads, hd, n_rot, neox); });
        std::vector<float> ref = q;
        for (int r = 0; r < rows; ++r)
          for (int h = 0; h < heads; ++h)
            rope_apply(&ref[(size_t(r) * heads + size_t(h)) * hd], n_rot, &cs[size_t(r) * size_t(n_rot)], neox);
        const std::string name = "rope n_rot " + std::to_string(n_rot) + (neox ? " neox" : " interleaved");
        check(name.c_str(), d.read(bq, q.size()), ref, kElementwiseBound);
      }
  }
  // glu: SwiGLU and GeGLU, with large |gate| (exp overflow, tanh saturation).
  for (bool gelu : {false, true}) {
    const int rows = 3, n_ff = 1536;
    std::vector<float> g = randn(rng, size_t(rows) * n_ff, 2.0f);
    const std::vector<float> u = randn(rng, g.size());
    for (size_t i = 0; i < g.size(); i += 97) g[i] = (i % 2 ? 1.0f : -1.0f) * (20.0f + float(i % 60));
    vk::Buffer bg = d.upload(g), bu = d.upload(u);
    d.run([&](vk::Recorder& r) { d.ops->glu(r, vk::view(bg), vk::view(bu), rows, n_ff, gelu); });
    std::vector<float> ref(g.size());
    if (gelu)
      kernels().geglu_f32(g.data(), u.data(), ref.data(), int64_t(g.size()));
    else
      kernels().swiglu_f32(g.data(), u.data(), ref.data(), int64_t(g.size()));
    check(gelu ? "glu gelu (geglu_f32)" : "glu silu (swiglu_f32)", d.read(bg, g.size()), ref, kElementwiseBound);
  }
}

// ---- KV store and attention ----

KvType cpu_type(KvFormat f) { return f == KvFormat::f32 ? KvType::f32 : f == KvFormat::f16 ? KvType::f16 : KvType::q8; }
const char* fmt_name(KvFormat f) { return kv_type_name(cpu_type(f)); }

ModelConfig config(int n_head, int n_head_kv, int hd) {
  ModelConfig c;
  c.arch = "test";
  c.n_layer = 1;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.head_dim = hd;
  c.n_rot = hd;
  c.n_embd = n_head * hd;
  c.n_ff = 4 * c.n_embd;
  c.n_ff_layer = {c.n_ff};
  return c;
}

// The device mirror of one layer: `cap` slots.
struct Mirror {
  vk::Buffer k, v, ks, vs;
  vk::KvLayerViews views;
  size_t row_bytes = 0, scale_bytes = 0;
  Mirror(Dev& d, KvFormat f, int cap, int kv_dim) {
    const size_t D = size_t(kv_dim);
    row_bytes = f == KvFormat::f32 ? D * 4 : f == KvFormat::f16 ? D * 2 : D;
    k = d.buffer(row_bytes * size_t(cap));
    v = d.buffer(row_bytes * size_t(cap));
    views.k = vk::view(k);
    views.v = vk::view(v);
    if (f == KvFormat::q8) {
      scale_bytes = D / kKvQ8Group * 4;
      ks = d.buffer(scale_bytes * size_t(cap));
      vs = d.buffer(scale_bytes * size_t(cap));
      views.ks = vk::view(ks);
      views.vs = vk::view(vs);
    }
  }
};

// Rows of [n][kv_dim] that exercise every rounding case of the stored formats: per 64-channel
// group, by (row + group) % 5, plain N(0, 1); q8 codes whose x / scale is a .5 boundary or
// one ulp either side of it (amax fixed first, so the scale is known); values around half's
// rounding ties, subnormals, underflow and overflow; tiny values whose q8 scale is subnormal;
// all zeros.
std::vector<float> tricky_rows(std::mt19937& rng, int n, int kv_dim) {
  std::vector<float> x = randn(rng, size_t(n) * size_t(kv_dim));
  std::uniform_int_distribution<int> code(0, 126), sign(0, 1), nudge(-1, 1);
  for (int r = 0; r < n; ++r)
    for (int g = 0; g < kv_dim / 64; ++g) {
      float* p = &x[size_t(r) * size_t(kv_dim) + size_t(g) * 64];
      switch ((r + g) % 5) {
        case 0: break;
        case 1: {
          const float amax = 0.5f + float(r % 7);
          const float s = amax / 127.0f;
          p[0] = amax;
          for (int i = 1; i < 64; ++i) {
            float v = (float(code(rng)) + 0.5f) * s;
            for (int k = nudge(rng); k != 0; k += k > 0 ? -1 : 1) v = std::nextafter(v, k > 0 ? 1e9f : -1e9f);
            p[i] = sign(rng) ? -v : v;
          }
          break;
        }
        case 2: {
          const float specials[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -(1.0f + 0x1p-11f), 65504.0f, 65519.0f,
                                    65520.0f, -70000.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 3e-6f, -5.5e-7f,
                                    6.1e-5f, 1e-10f, -0.0f, 0.33333334f, 2049.0f, 2051.0f, 1e30f};
          for (int i = 0; i < 64; ++i) p[i] = specials[size_t(i) % (sizeof(specials) / sizeof(float))] * (i >= 20 ? 1.0001f : 1.0f);
          break;
        }
        case 3:
          for (int i = 0; i < 64; ++i) p[i] *= 1e-40f;  // subnormal inputs and scale
          break;
        case 4:
          for (int i = 0; i < 64; ++i) p[i] = 0.0f;
          break;
      }
    }
  return x;
}

// kv_store: the mirror equals KvCache::export_prefix's bytes, stored in two batches.
void run_kv_store(Dev& d) {
  std::mt19937 rng(11);
  const int n_head_kv = 3, hd = 64, kv_dim = n_head_kv * hd, n = 45, split = 7;
  const ModelConfig c = config(6, n_head_kv, hd);
  const std::vector<float> K = tricky_rows(rng, n, kv_dim), V = tricky_rows(rng, n, kv_dim);
  for (KvFormat f : {KvFormat::f32, KvFormat::f16, KvFormat::q8}) {
    KvCache cache(c, KvOptions{cpu_type(f), 0, 4}, 64, 64, {});
    Mirror m(d, f, 64, kv_dim);
    vk::Buffer bk = d.upload(K), bv = d.upload(V);
    for (auto [p0, cnt] : {std::pair{0, split}, std::pair{split, n - split}}) {
      must(cache.begin_batch(p0, cnt), "begin_batch");
      for (int p = p0; p < p0 + cnt; ++p) cache.store(0, p, &K[size_t(p) * kv_dim], &V[size_t(p) * kv_dim]);
      const uint64_t off = uint64_t(p0) * kv_dim * 4, len = uint64_t(cnt) * kv_dim * 4;
      d.run([&](vk::Recorder& r) {
        d.ops->kv_store(r, vk::view(bk, off, len), vk::view(bv, off, len), m.views, f, p0, cnt, kv_dim);
      });
    }
    std::vector<uint8_t> cpu(must(cache.prefix_bytes(n), "prefix_bytes"));
    must(cache.export_prefix(n, cpu.data()), "export_prefix");
    std::vector<uint8_t> dev = d.read_bytes(m.k, m.row_bytes * n), tmp = d.read_bytes(m.v, m.row_bytes * n);
    dev.insert(dev.end(), tmp.begin(), tmp.end());
    if (f == KvFormat::q8) {
      tmp = d.read_bytes(m.ks, m.scale_bytes * n);
      dev.insert(dev.end(), tmp.begin(), tmp.end());
      tmp = d.read_bytes(m.vs, m.scale_bytes * n);
      dev.insert(dev.end(), tmp.begin(), tmp.end());
    }
    ASSERT_EQ(dev.size(), cpu.size()) << fmt_name(f);
    size_t diff = 0, first = 0;
    for (size_t i = 0; i < cpu.size(); ++i)
      if (dev[i] != cpu[i] && diff++ == 0) first = i;
    std::printf("[ kv   ] kv_store %-4s %zu bytes, %zu differ\n", fmt_name(f), cpu.size(), diff);
    EXPECT_EQ(diff, 0u) << fmt_name(f) << ": first difference at byte " << first;
  }
}

struct AttnCase {
  KvFormat f;
  int hd, group, window;
};

// One configuration: positions stored batch by batch into both caches, queries after the
// batches that end at them (the CPU cache's window ring only holds what a query at the
// newest positions needs). Returns the largest NMSE seen.
double run_attention_case(Dev& d, const AttnCase& ac, std::mt19937& rng) {
  const int n_head_kv = 2, n_head = n_head_kv * ac.group, hd = ac.hd, kv_dim = n_head_kv * hd;
  const int cap = 320, n_batch = 17;
  const ModelConfig c = config(n_head, n_head_kv, hd);
  std::vector<int> layer_window;
  if (ac.window > 0) layer_window = {ac.window};
  KvCache cache(c, KvOptions{cpu_type(ac.f), 0, 4}, cap, n_batch, layer_window);
  Mirror m(d, ac.f, cap, kv_dim);
  std::vector<float> inv_freq(size_t(hd / 2));
  for (int i = 0; i < hd / 2; ++i) inv_freq[size_t(i)] = std::pow(10000.0f, -2.0f * float(i) / float(hd));
  const RopeSpec rope{inv_freq.data(), hd, false};
  const float scale = 1.0f / std::sqrt(float(hd));
  // Batches [p0, p0 + cnt) and the query rows at their end (n_q rows ending at the last position).
  struct Step {
    int p0, cnt, n_q;
  };
  const Step steps[] = {{0, 1, 1}, {1, 1, 1}, {2, 38, 0}, {40, 17, 17}, {57, 14, 1}, {71, 230, 1}};
  double worst = 0;
  for (const Step& s : steps) {
    const std::vector<float> K = randn(rng, size_t(s.cnt) * kv_dim, 1.5f), V = randn(rng, size_t(s.cnt) * kv_dim);
    must(cache.begin_batch(s.p0, s.cnt), "begin_batch");
    for (int i = 0; i < s.cnt; ++i) cache.store(0, s.p0 + i, &K[size_t(i) * kv_dim], &V[size_t(i) * kv_dim]);
    vk::Buffer bk = d.upload(K), bv = d.upload(V);
    d.run([&](vk::Recorder& r) {
      d.ops->kv_store(r, vk::view(bk), vk::view(bv), m.views, ac.f, s.p0, s.cnt, kv_dim);
    });
    if (s.n_q == 0) continue;
    const int q0 = s.p0 + s.cnt - s.n_q, qdim = n_head * hd;
    const std::vector<float> q = randn(rng, size_t(s.n_q) * qdim, 1.5f);
    vk::Buffer bq = d.upload(q), bo = d.buffer(q.size() * 4);
    d.run([&](vk::Recorder& r) {
      d.ops->attention(r, vk::view(bq), m.views, ac.f, vk::view(bo), q0, s.n_q, n_head, n_head_kv, hd, scale,
                       ac.window);
    });
    std::vector<float> ref(q.size());
    std::vector<AttnAccum> acc(size_t(ac.group));
    for (int i = 0; i < s.n_q; ++i)
      for (int kvh = 0; kvh < n_head_kv; ++kvh) {
        for (AttnAccum& a : acc) attn_accum_init(a, hd);
        const size_t off = size_t(i) * qdim + size_t(kvh) * ac.group * hd;
        cache.attend_part(0, q0 + i, kvh, ac.group, &q[off], scale, rope, 0, 1, acc.data());
        for (int j = 0; j < ac.group; ++j)
          for (int e = 0; e < hd; ++e) ref[off + size_t(j) * hd + size_t(e)] = acc[size_t(j)].acc[e] / acc[size_t(j)].l;
      }
    const double e = nmse(d.read(bo, q.size()), ref);
    worst = std::max(worst, e);
    EXPECT_LE(e, kAttentionBound) << fmt_name(ac.f) << " hd " << hd << " group " << ac.group << " window "
                                  << ac.window << " rows " << q0 << ".." << q0 + s.n_q - 1;
  }
  return worst;
}

void run_attention(Dev& d) {
  std::mt19937 rng(5);
  std::map<std::string, double> worst;
  for (KvFormat f : {KvFormat::f32, KvFormat::f16, KvFormat::q8})
    for (int hd : {64, 256})
      for (int group : {1, 3})
        for (int window : {0, 5}) {
          const double e = run_attention_case(d, AttnCase{f, hd, group, window}, rng);
          double& w = worst[std::string("attention ") + fmt_name(f) + " hd " + std::to_string(hd)];
          w = std::max(w, e);
        }
  for (const auto& [name, e] : worst) std::printf("[ nmse ] %-34s %.3g (max over cases)\n", name.c_str(), e);
}

class VkOps : public ::testing::TestWithParam<bool> {};  // param: disable_f16

TEST_P(VkOps, Elementwise) {
  Dev d;
  if (std::string why = d.open(GetParam(), false); !why.empty()) GTEST_SKIP() << why;
  run_elementwise(d);
}

TEST_P(VkOps, KvStoreBytes) {
  Dev d;
  if (std::string why = d.open(GetParam(), false); !why.empty()) GTEST_SKIP() << why;
  run_kv_store(d);
}

TEST_P(VkOps, Attention) {
  Dev d;
  if (std::string why = d.open(GetParam(), false); !why.empty()) GTEST_SKIP() << why;
  run_attention(d);
}

INSTANTIATE_TEST_SUITE_P(F16, VkOps, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "disable_f16" : "default"; });

TEST(VkOpsValidation, EveryOpReportsNothing) {
  if (!vk::probe().validation_layer) GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed";
  Dev d;
  if (std::string why = d.open(false, true); !why.empty()) GTEST_SKIP() << why;
  run_elementwise(d);
  run_kv_store(d);
  run_attention(d);
  EXPECT_EQ(d.ctx->validation_messages(), 0) << d.ctx->last_validation_message();
}

}  // namespace
}  // namespace pllm

#else  // the build has no Vulkan backend

TEST(VkOps, NotBuilt) { GTEST_SKIP() << "built without the Vulkan backend"; }

#endif
