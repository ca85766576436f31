// Device matrix products (backends/vulkan/vk_matmul.*) against their CPU twins, on whatever
// Vulkan device is present (lavapipe on CI machines without a GPU).
//   float path: dequantize_row + a double-precision dot (the CPU's exact mode);
//   int8 path:  the CPU kernels' quantize_act + vec_dot (ActMode::int8).
// Error measure: NMSE = sum (y - ref)^2 / sum ref^2 per type and path, bound 5e-4.
#include <gtest/gtest.h>

#if PLLM_HAVE_VULKAN

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backends/vulkan/vk_matmul.h"
#include "base/fp16.h"
#include "kernels/kernels.h"
#include "lowbit_blocks.h"
#include "quant/reference.h"

namespace pllm::vk {

// The test hook declared in vk_matmul.h.
struct MatmulTestAccess {
  static void set_max_binding_bytes(MatmulKernels& k, uint64_t b) { k.set_max_binding_bytes(b); }
};

namespace {

constexpr double kMaxNmse = 5e-4;
constexpr int kMaxN = 17;
const int kNs[] = {1, 3, 8, 17};
const TensorType kAll[] = {TensorType::F32,  TensorType::F16,  TensorType::Q4_0, TensorType::Q4_1,   TensorType::Q5_0,
                           TensorType::Q5_1, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q5_K,   TensorType::Q6_K,
                           TensorType::Q3_K, TensorType::IQ4_NL, TensorType::IQ4_XS};

bool is_k(TensorType t) { return type_traits(uint32_t(t))->block_elems == 256; }
bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16; }
const char* name(TensorType t) { return type_traits(uint32_t(t))->name; }

// Q5_K, Q3_K, IQ4_NL and IQ4_XS have no quantiser in src/quant (the engine reads them from
// llama.cpp's files): their blocks are random valid bytes here.
constexpr size_t kQ5KBytes = 176;

struct Weights {
  std::vector<uint8_t> bytes;  // rows * row_bytes, the file's layout
  std::vector<float> deq;      // [rows][cols], what the float path must see
  size_t row_bytes = 0;
};

Weights make_weights(TensorType t, int rows, int cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  Weights w;
  w.row_bytes = *row_bytes(uint32_t(t), uint64_t(cols));
  w.bytes.resize(size_t(rows) * w.row_bytes);
  w.deq.resize(size_t(rows) * size_t(cols));
  std::vector<float> x(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    uint8_t* dst = w.bytes.data() + size_t(r) * w.row_bytes;
    float* deq = w.deq.data() + size_t(r) * size_t(cols);
    for (float& v : x) v = nd(rng);
    switch (t) {
      case TensorType::F32: std::memcpy(dst, x.data(), w.row_bytes); break;
      case TensorType::F16: ref::quantize_row_f16(x.data(), reinterpret_cast<uint16_t*>(dst), cols); break;
      case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(dst), cols); break;
      case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(dst), cols); break;
      case TensorType::Q5_0: ref::quantize_row_q5_0(x.data(), reinterpret_cast<block_q5_0*>(dst), cols); break;
      case TensorType::Q5_1: ref::quantize_row_q5_1(x.data(), reinterpret_cast<block_q5_1*>(dst), cols); break;
      case TensorType::Q8_0: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(dst), cols); break;
      case TensorType::Q4_K: ref::quantize_row_q4_K(x.data(), reinterpret_cast<block_q4_K*>(dst), cols); break;
      case TensorType::Q6_K: ref::quantize_row_q6_K(x.data(), reinterpret_cast<block_q6_K*>(dst), cols); break;
      case TensorType::Q5_K:
        for (size_t i = 0; i < w.row_bytes; ++i) dst[i] = uint8_t(byte(rng));
        for (size_t b = 0; b < w.row_bytes; b += kQ5KBytes) {  // sane super-block scales
          const uint16_t d = fp32_to_fp16(0.002f + 0.002f * float(byte(rng)) / 255.0f);
          const uint16_t m = fp32_to_fp16(0.004f * float(byte(rng)) / 255.0f);
          std::memcpy(dst + b, &d, 2);
          std::memcpy(dst + b + 2, &m, 2);
        }
        break;
      case TensorType::Q3_K:
      case TensorType::IQ4_NL:
      case TensorType::IQ4_XS:  // no quantiser either: random blocks, scales as Q5_K's d
        lowbit_test::fill_blocks(t, dst, w.row_bytes, rng, [&](std::mt19937&) {
          return fp32_to_fp16(0.002f + 0.002f * float(byte(rng)) / 255.0f);
        });
        break;
      default: break;
    }
    kernels().for_type(t).dequantize_row(dst, deq, cols);
  }
  return w;
}

// The CPU's answers for n activation rows X [n][cols]: Y [n][rows].
std::vector<float> cpu_twin(TensorType t, const Weights& w, int rows, int cols, const float* X, int n, bool int8) {
  std::vector<float> y(size_t(n) * size_t(rows));
  const TypeKernels& tk = kernels().for_type(t);
  std::vector<uint8_t> xq;
  for (int r = 0; r < n; ++r) {
    const float* x = X + size_t(r) * size_t(cols);
    if (int8 && !is_float(t)) {
      xq.resize(tk.act_bytes(cols));
      tk.quantize_act(x, xq.data(), cols);
      for (int o = 0; o < rows; ++o)
        y[size_t(r) * size_t(rows) + size_t(o)] = tk.vec_dot(cols, w.bytes.data() + size_t(o) * w.row_bytes, xq.data());
      continue;
    }
    for (int o = 0; o < rows; ++o) {
      const float* wr = w.deq.data() + size_t(o) * size_t(cols);
      double s = 0.0;
      for (int i = 0; i < cols; ++i) s += double(wr[i]) * double(x[i]);
      y[size_t(r) * size_t(rows) + size_t(o)] = float(s);
    }
  }
  return y;
}

double nmse(const std::vector<float>& y, const std::vector<float>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double e = double(y[i]) - double(ref[i]);
    num += e * e;
    den += double(ref[i]) * double(ref[i]);
  }
  return den > 0.0 ? num / den : num;
}

struct Env {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Recorder> rec;
  std::unique_ptr<MatmulKernels> mm;
  std::string skip;  // why there is no device

  explicit Env(const ContextOptions& o) {
    auto c = Context::create(o);
    if (!c.ok()) {
      skip = c.error().message;
      return;
    }
    ctx = std::move(*c);
    auto r = Recorder::create(*ctx);
    auto m = MatmulKernels::create(*ctx);
    if (!r.ok() || !m.ok()) {
      skip = !r.ok() ? r.error().message : m.error().message;
      return;
    }
    rec = std::move(*r);
    mm = std::move(*m);
  }
};

ContextOptions options() {
  ContextOptions o;
  o.allow_cpu_device = true;
  return o;
}

constexpr uint64_t kWOffset = 48;  // weights start at a 16-byte-aligned offset, not at 0

// Runs Y = X · Wᵀ on the device for n rows; empty on a Vulkan failure (reported to gtest).
std::vector<float> device_matmul(Env& env, TensorType t, const Weights& w, int rows, int cols, const float* X, int n,
                                 bool int8) {
  Context& ctx = *env.ctx;
  const size_t wbytes = w.bytes.size(), xbytes = size_t(n) * size_t(cols) * 4, ybytes = size_t(n) * size_t(rows) * 4;
  auto wb = ctx.buffer(kWOffset + wbytes + 16, Mem::device);
  auto xb = ctx.buffer(xbytes, Mem::device);
  auto yb = ctx.buffer(ybytes, Mem::host);
  if (!wb.ok() || !xb.ok() || !yb.ok()) {
    ADD_FAILURE() << "buffer allocation failed";
    return {};
  }
  EXPECT_TRUE(ctx.upload(*wb, kWOffset, w.bytes.data(), wbytes).ok());
  EXPECT_TRUE(ctx.upload(*xb, 0, X, xbytes).ok());
  std::memset(yb->mapped(), 0xFF, ybytes);  // NaN: unwritten outputs cannot pass
  DevMatrix W{view(*wb, kWOffset, wbytes), t, rows, cols, w.row_bytes};
  auto b = env.rec->begin();
  EXPECT_TRUE(b.ok());
  auto r = env.mm->record(*env.rec, W, view(*xb), view(*yb), n, int8);
  if (!r.ok()) {
    ADD_FAILURE() << "record: " << r.error().message;
    return {};
  }
  auto s = env.rec->submit();
  if (!s.ok()) {
    ADD_FAILURE() << "submit: " << s.error().message;
    return {};
  }
  std::vector<float> y(size_t(n) * size_t(rows));
  std::memcpy(y.data(), yb->mapped(), ybytes);
  return y;
}

struct Shape {
  int rows, cols;
};
std::vector<Shape> shapes(TensorType t) {
  if (is_k(t)) return {{37, 256}, {20, 768}};
  if (is_float(t)) return {{37, 96}, {13, 101}, {24, 512}};  // 101: rows end inside a unit
  return {{37, 96}, {24, 512}};
}

// Every type, shape and n on one context; prints the worst NMSE per type and path.
void run_all(const ContextOptions& o, const char* label, std::span<const int> ns) {
  Env env(o);
  if (!env.skip.empty()) GTEST_SKIP() << env.skip;
  const auto t0 = std::chrono::steady_clock::now();
  std::printf("[%s] %s: fp16 storage %s, int dot %s\n", label, env.ctx->info().name.c_str(),
              env.ctx->use_f16() ? "yes" : "no", env.ctx->use_int_dot() ? "yes" : "no");
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (TensorType t : kAll) {
    double worst[2] = {0.0, 0.0};
    for (const Shape& sh : shapes(t)) {
      const Weights w = make_weights(t, sh.rows, sh.cols, rng);
      std::vector<float> X(size_t(kMaxN) * size_t(sh.cols));
      for (float& v : X) v = nd(rng);
      for (int n : ns)
        for (int path = 0; path < 2; ++path) {
          const bool int8 = path == 1;
          const auto ref = cpu_twin(t, w, sh.rows, sh.cols, X.data(), n, int8);
          const auto y = device_matmul(env, t, w, sh.rows, sh.cols, X.data(), n, int8);
          if (y.empty()) return;
          const double e = nmse(y, ref);
          EXPECT_LE(e, kMaxNmse) << name(t) << (int8 ? " int8" : " float") << " rows " << sh.rows << " cols "
                                 << sh.cols << " n " << n;
          worst[path] = std::max(worst[path], std::isnan(e) ? 1e300 : e);
        }
    }
    std::printf("[%s] %-5s NMSE float %.3g  int8 %.3g%s\n", label, name(t), worst[0], worst[1],
                is_float(t) ? " (float weights: int8 takes the float path)" : "");
  }
  if (o.validation) {
    EXPECT_EQ(env.ctx->validation_messages(), 0) << env.ctx->last_validation_message();
    std::printf("[%s] validation messages: %d\n", label, env.ctx->validation_messages());
  }
  std::printf("[%s] %.1f s\n", label,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

TEST(VkMatmul, AllTypes) { run_all(options(), "default", kNs); }

TEST(VkMatmul, AllTypesWithoutF16) {
  ContextOptions o = options();
  o.disable_f16 = true;
  run_all(o, "no-f16", kNs);
}

TEST(VkMatmul, AllTypesWithoutIntDot) {
  ContextOptions o = options();
  o.disable_int_dot = true;
  run_all(o, "no-int-dot", kNs);
}

TEST(VkMatmul, AllTypesUnderValidation) {
  if (!probe().validation_layer) GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed";
  ContextOptions o = options();
  o.validation = true;
  run_all(o, "validation", kNs);
  // The other shader variants (uint loads for 16-bit fields, plain int products) too.
  o.disable_f16 = o.disable_int_dot = true;
  run_all(o, "validation, no-f16, no-int-dot", kNs);
  o.gpu_layout = true;
  run_all(o, "validation, GPU layout, no-f16, no-int-dot", kNs);
  o.disable_f16 = o.disable_int_dot = false;
  run_all(o, "validation, GPU layout", kNs);
}

// On a CPU device (lavapipe) the shaders a GPU gets (16 lanes per row, shared-memory
// reduction, fp16 loads, packed int8 dot) are not chosen: force them, with each feature on
// and off, so they are held to the same bound here.
TEST(VkMatmul, GpuLayoutAllVariants) {
  ContextOptions o = options();
  o.gpu_layout = true;
  run_all(o, "GPU layout", kNs);
  o.disable_f16 = true;
  run_all(o, "GPU layout, no-f16", kNs);
  o.disable_f16 = false;
  o.disable_int_dot = true;
  run_all(o, "GPU layout, no-int-dot", kNs);
}

// A matrix larger than one binding may span (262144 x 640 Q6_K is 137 MB on lavapipe's 128 MiB
// limit) is split into row ranges. Lowering the limit tests the same path on small matrices:
// ranges start at unaligned rows (skip bytes) and odd block sizes (Q6_K: 210 bytes).
TEST(VkMatmul, SplitsRowRanges) {
  Env env(options());
  if (!env.skip.empty()) GTEST_SKIP() << env.skip;
  MatmulTestAccess::set_max_binding_bytes(*env.mm, 2000);
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (TensorType t : {TensorType::Q6_K, TensorType::Q4_0, TensorType::Q5_1, TensorType::F16, TensorType::Q4_K}) {
    const int cols = is_k(t) ? 256 : 96, rows = 61;
    const Weights w = make_weights(t, rows, cols, rng);
    std::vector<float> X(size_t(kMaxN) * size_t(cols));
    for (float& v : X) v = nd(rng);
    for (int n : {1, 17})
      for (bool int8 : {false, true}) {
        const auto y = device_matmul(env, t, w, rows, cols, X.data(), n, int8);
        ASSERT_FALSE(y.empty());
        // 61 rows of at most 2000 bytes per binding: several ranges (+1: the int8 pre-pass).
        const int ranges = int((uint64_t(rows) * w.row_bytes + 1999) / 2000);
        EXPECT_GE(env.rec->dispatches(), ranges + (int8 && !is_float(t) ? 1 : 0));
        const double e = nmse(y, cpu_twin(t, w, rows, cols, X.data(), n, int8));
        EXPECT_LE(e, kMaxNmse) << name(t) << " n " << n << (int8 ? " int8" : " float");
        std::printf("[split] %-5s n %2d %s NMSE %.3g\n", name(t), n, int8 ? "int8 " : "float", e);
      }
  }
  // A row larger than the limit cannot be bound at all.
  MatmulTestAccess::set_max_binding_bytes(*env.mm, 64);
  const Weights w = make_weights(TensorType::Q8_0, 2, 96, rng);
  auto wb = env.ctx->buffer(w.bytes.size(), Mem::device);
  auto xb = env.ctx->buffer(96 * 4, Mem::device);
  auto yb = env.ctx->buffer(2 * 4, Mem::host);
  ASSERT_TRUE(wb.ok() && xb.ok() && yb.ok());
  ASSERT_TRUE(env.rec->begin().ok());
  DevMatrix W{view(*wb), TensorType::Q8_0, 2, 96, w.row_bytes};
  EXPECT_FALSE(env.mm->record(*env.rec, W, view(*xb), view(*yb), 1, false).ok());
}

// The real thing: a 262144 x 640 Q8_0 embedding (178 MB) against lavapipe's 128 MiB binding
// limit. Off by default (it moves ~0.5 GB of memory around); run with
// --gtest_also_run_disabled_tests. Rows are sampled against the CPU.
TEST(VkMatmul, DISABLED_LargerThanOneBinding) {
  Env env(options());
  if (!env.skip.empty()) GTEST_SKIP() << env.skip;
  const int rows = 262144, cols = 640;
  const size_t rb = *row_bytes(uint32_t(TensorType::Q8_0), cols);
  const size_t bytes = size_t(rows) * rb;
  if (bytes <= env.ctx->info().max_storage_range) GTEST_SKIP() << "this device binds it whole";
  std::mt19937 rng(5);
  std::vector<uint8_t> w(bytes);
  for (size_t i = 0; i < bytes; i += 4) {
    const uint32_t v = rng();
    std::memcpy(w.data() + i, &v, std::min<size_t>(4, bytes - i));
  }
  for (size_t b = 0; b < bytes; b += sizeof(block_q8_0)) {  // sane scales, not random halves
    const uint16_t d = fp32_to_fp16(0.001f + 0.001f * float(rng() % 256) / 255.0f);
    std::memcpy(w.data() + b, &d, 2);
  }
  std::vector<float> X(size_t(cols) * 3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : X) v = nd(rng);
  auto wb = env.ctx->buffer(bytes + 16, Mem::device);
  auto xb = env.ctx->buffer(X.size() * 4, Mem::device);
  auto yb = env.ctx->buffer(size_t(rows) * 3 * 4, Mem::host);
  ASSERT_TRUE(wb.ok() && xb.ok() && yb.ok());
  ASSERT_TRUE(env.ctx->upload(*wb, 0, w.data(), bytes).ok());
  ASSERT_TRUE(env.ctx->upload(*xb, 0, X.data(), X.size() * 4).ok());
  const TypeKernels& tk = kernels().for_type(TensorType::Q8_0);
  std::vector<float> deq(cols);
  for (bool int8 : {false, true}) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(env.rec->begin().ok());
    DevMatrix W{view(*wb, 0, bytes), TensorType::Q8_0, rows, cols, rb};
    ASSERT_TRUE(env.mm->record(*env.rec, W, view(*xb), view(*yb), 3, int8).ok());
    ASSERT_TRUE(env.rec->submit().ok());
    EXPECT_GE(env.rec->dispatches(), 2);
    const float* y = static_cast<const float*>(yb->mapped());
    std::vector<float> got, ref;
    std::vector<uint8_t> xq(tk.act_bytes(cols));
    for (int r = 0; r < 3; ++r) {
      tk.quantize_act(X.data() + size_t(r) * cols, xq.data(), cols);
      for (int o = 0; o < rows; o += (o > rows - 300 ? 1 : 257)) {
        const uint8_t* wr = w.data() + size_t(o) * rb;
        got.push_back(y[size_t(r) * rows + size_t(o)]);
        if (int8) {
          ref.push_back(tk.vec_dot(cols, wr, xq.data()));
        } else {
          tk.dequantize_row(wr, deq.data(), cols);
          double s = 0.0;
          for (int i = 0; i < cols; ++i) s += double(deq[size_t(i)]) * X[size_t(r) * cols + size_t(i)];
          ref.push_back(float(s));
        }
      }
    }
    const double e = nmse(got, ref);
    EXPECT_LE(e, kMaxNmse);
    std::printf("[large] Q8_0 %d x %d, %d ranges, %s NMSE %.3g, %.2f s\n", rows, cols, env.rec->dispatches() - int8,
                int8 ? "int8 " : "float", e,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

TEST(VkMatmul, UnsupportedTypes) {
  for (TensorType t : kAll) EXPECT_TRUE(matmul_supported(t)) << name(t);
  EXPECT_FALSE(matmul_supported(TensorType::BF16));
  EXPECT_FALSE(matmul_supported(TensorType::Q8_K));
  Env env(options());
  if (!env.skip.empty()) GTEST_SKIP() << env.skip;
  auto b = env.ctx->buffer(4096, Mem::device);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(env.rec->begin().ok());
  DevMatrix W{view(*b, 0, 2048), TensorType::BF16, 4, 256, 512};
  auto r = env.mm->record(*env.rec, W, view(*b, 2048, 1024), view(*b, 3072, 1024), 1, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Status::unsupported);
}

}  // namespace
}  // namespace pllm::vk

#else

TEST(VkMatmul, BackendNotBuilt) { GTEST_SKIP() << "built without the Vulkan backend"; }

#endif
