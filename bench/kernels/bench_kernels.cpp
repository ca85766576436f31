// Micro-benchmarks of the matrix-vector kernels on SmolLM2-135M shapes, one thread.
//
// For every runnable ISA table, weight type and shape (rows x cols = 576x1536 and
// 1536x576) one "pass" dots every weight row with the activation(s):
//   int8        quantize_act once (outside the timing), then vec_dot per row
//   deq+dot     the old exact path: dequantize_row into a scratch row + the F32 type's vec_dot
//   f32         the fused exact path: vec_dot_f32 per row
//   f32_multi/N vec_dot_f32_multi with N activation rows (prefill); each weight
//               block is decoded once for all N rows
//   int8_loop/N prefill the old way: vec_dot for every (row, token), N tokens
//   gemm/N      prefill with the tiled integer GEMM gemm_q8, N tokens
//               (int8_loop/N and gemm/N report GOPS = 2 * rows * cols * N / time)
// What matmul runs in decode, rows in chunks of 64 (about what a thread gets per task):
//   int8_rows   vec_dot_rows; int8_rows/N: vec_dot_rows_multi with N activation rows
//   f32_rows    vec_dot_f32_rows; f32_rows/N: vec_dot_f32_rows_multi (exact mode)
//   int16       vec_dot_i16act_tile, one activation row (quantize_row_q16 outside the
//               timing, as quantize_act for int8); int16/N: N activation rows
//   i16_gemm/N  gemm_i16 (the same results as int16/N, bit for bit)
//   i16_panels/N gemm_i16_panels over the rows packed into 16-row panels (outside the timing)
// and in exact-mode prefill (64 tokens, rows in chunks of 64):
//   f32_gemm/64 gemm_f32, beside f32_rows/64 (the same sums in groups of 8 tokens)
// bytes_per_second counts weight bytes read per pass (so for f32_multi/N it is the
// weight-streaming rate; eff_GB/s multiplies by N: weight bytes per token-row).
// Both matrices are ~0.3-2.4 MB, i.e. they live in L2/L3: these are kernel
// throughput numbers, not DRAM-bound decode numbers.
//
//   bench_kernels --benchmark_filter='Q4_0'   (names: isa/type/shape/kernel)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/panel.h"
#include "quant/reference.h"

using namespace pllm;

namespace {

struct Mat {
  TensorType type;
  int64_t rows, cols;
  size_t row_bytes;
  std::vector<uint8_t> data;
};

Mat make_matrix(TensorType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  Mat m{t, rows, cols, static_cast<size_t>(*row_bytes(static_cast<uint32_t>(t), cols)), {}};
  m.data.resize(m.row_bytes * rows);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> x(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : x) v = nd(rng);
    uint8_t* p = m.data.data() + r * m.row_bytes;
    switch (t) {
      case TensorType::F32: std::memcpy(p, x.data(), m.row_bytes); break;
      case TensorType::F16: ref::quantize_row_f16(x.data(), reinterpret_cast<uint16_t*>(p), cols); break;
      case TensorType::BF16: ref::quantize_row_bf16(x.data(), reinterpret_cast<uint16_t*>(p), cols); break;
      case TensorType::Q4_0: ref::quantize_row_q4_0(x.data(), reinterpret_cast<block_q4_0*>(p), cols); break;
      case TensorType::Q4_1: ref::quantize_row_q4_1(x.data(), reinterpret_cast<block_q4_1*>(p), cols); break;
      case TensorType::Q5_0: ref::quantize_row_q5_0(x.data(), reinterpret_cast<block_q5_0*>(p), cols); break;
      case TensorType::Q5_1: ref::quantize_row_q5_1(x.data(), reinterpret_cast<block_q5_1*>(p), cols); break;
      case TensorType::Q8_0: ref::quantize_row_q8_0(x.data(), reinterpret_cast<block_q8_0*>(p), cols); break;
      case TensorType::Q4_K: ref::quantize_row_q4_K(x.data(), reinterpret_cast<block_q4_K*>(p), cols); break;
      case TensorType::Q6_K: ref::quantize_row_q6_K(x.data(), reinterpret_cast<block_q6_K*>(p), cols); break;
      case TensorType::Q2_K: ref::quantize_row_q2_K(x.data(), reinterpret_cast<block_q2_K*>(p), cols); break;
      case TensorType::Q3_K: ref::quantize_row_q3_K(x.data(), reinterpret_cast<block_q3_K*>(p), cols); break;
      case TensorType::Q5_K: ref::quantize_row_q5_K(x.data(), reinterpret_cast<block_q5_K*>(p), cols); break;
      case TensorType::IQ4_NL: ref::quantize_row_iq4_nl(x.data(), reinterpret_cast<block_iq4_nl*>(p), cols); break;
      case TensorType::IQ4_XS: ref::quantize_row_iq4_xs(x.data(), reinterpret_cast<block_iq4_xs*>(p), cols); break;
      default: std::abort();
    }
  }
  return m;
}

std::vector<float> make_act(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

enum class Kind { int8, deq_dot, f32, f32_multi, int8_loop, gemm, int8_rows, f32_rows, f32_gemm, int16, i16_gemm, i16_panels };
constexpr int64_t kChunk = 64;

void run(benchmark::State& st, const KernelTable* kt, const Mat* m, Kind kind, int nx) {
  const TypeKernels& k = kt->for_type(m->type);
  std::mt19937 rng(7);
  const int64_t cols = m->cols;
  const std::vector<float> x = make_act(cols * nx, rng);
  const size_t act_stride = k.act_bytes(cols);
  const bool multi_act = kind == Kind::int8_loop || kind == Kind::gemm || kind == Kind::int8_rows;
  std::vector<uint8_t> xq(act_stride * (multi_act ? nx : 1));
  for (int j = 0; j < (multi_act ? nx : 1); ++j) k.quantize_act(x.data() + j * cols, xq.data() + j * act_stride, cols);
  const size_t q16_stride = cols / 32 * sizeof(block_q16);
  const bool i16 = kind == Kind::int16 || kind == Kind::i16_gemm || kind == Kind::i16_panels;
  std::vector<uint8_t> x16(i16 ? q16_stride * nx : 0);
  if (i16)
    for (int j = 0; j < nx; ++j) kt->quantize_row_q16(x.data() + j * cols, x16.data() + j * q16_stride, cols);
  std::vector<float> deq(cols), y(m->rows * nx);
  std::vector<uint8_t> panels(kind == Kind::i16_panels ? m->data.size() : 0);
  for (int64_t p = 0; p < int64_t(panels.size() / (kPanelRows * m->row_bytes)); ++p)
    pack_panel(m->type, m->data.data() + p * kPanelRows * m->row_bytes, m->row_bytes, cols,
               panels.data() + p * kPanelRows * m->row_bytes);
  for (auto _ : st) {
    const uint8_t* w = m->data.data();
    switch (kind) {
      case Kind::int8:
        for (int64_t r = 0; r < m->rows; ++r) y[r] = k.vec_dot(cols, w + r * m->row_bytes, xq.data());
        break;
      case Kind::deq_dot:
        for (int64_t r = 0; r < m->rows; ++r) {
          k.dequantize_row(w + r * m->row_bytes, deq.data(), cols);
          y[r] = kt->for_type(TensorType::F32).vec_dot(cols, deq.data(), x.data());
        }
        break;
      case Kind::f32:
        for (int64_t r = 0; r < m->rows; ++r) y[r] = k.vec_dot_f32(cols, w + r * m->row_bytes, x.data());
        break;
      case Kind::int8_loop:
        for (int64_t r = 0; r < m->rows; ++r)
          for (int j = 0; j < nx; ++j)
            y[j * m->rows + r] = k.vec_dot(cols, w + r * m->row_bytes, xq.data() + j * act_stride);
        break;
      case Kind::gemm:
        k.gemm_q8(cols, w, m->row_bytes, static_cast<int>(m->rows), xq.data(), act_stride, nx, y.data(), m->rows);
        break;
      case Kind::f32_multi:
        for (int64_t r = 0; r < m->rows; ++r) {
          k.vec_dot_f32_multi(cols, w + r * m->row_bytes, x.data(), cols, nx, y.data() + r, m->rows);
        }
        break;
      case Kind::int8_rows:
      case Kind::f32_rows:
      case Kind::f32_gemm:
      case Kind::int16:
      case Kind::i16_gemm:
      case Kind::i16_panels:
        for (int64_t r0 = 0; r0 < m->rows; r0 += kChunk) {
          const int nr = int(std::min(kChunk, m->rows - r0));
          const uint8_t* wc = w + r0 * m->row_bytes;
          float* yc = y.data() + r0;
          if (kind == Kind::i16_panels)
            k.gemm_i16_panels(cols, panels.data() + r0 * m->row_bytes, nr / kPanelRows, x16.data(), q16_stride, nx, yc,
                              m->rows);
          else if (kind == Kind::f32_gemm)
            k.gemm_f32(cols, wc, m->row_bytes, nr, x.data(), cols, nx, yc, m->rows);
          else if (kind == Kind::i16_gemm)
            k.gemm_i16(cols, wc, m->row_bytes, nr, x16.data(), q16_stride, nx, yc, m->rows);
          else if (kind == Kind::int16)
            k.vec_dot_i16act_tile(cols, wc, m->row_bytes, nr, x16.data(), q16_stride, nx, yc, m->rows);
          else if (kind == Kind::f32_rows && nx == 1)
            k.vec_dot_f32_rows(cols, wc, m->row_bytes, nr, x.data(), yc);
          else if (kind == Kind::f32_rows)
            k.vec_dot_f32_rows_multi(cols, wc, m->row_bytes, nr, x.data(), cols, nx, yc, m->rows);
          else if (nx == 1)
            k.vec_dot_rows(cols, wc, m->row_bytes, nr, xq.data(), yc);
          else
            k.vec_dot_rows_multi(cols, wc, m->row_bytes, nr, xq.data(), act_stride, nx, yc, m->rows);
        }
        break;
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(m->data.size());
  st.SetBytesProcessed(static_cast<int64_t>(bytes * st.iterations()));
  st.counters["eff_GB/s"] = benchmark::Counter(bytes * nx * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  if (multi_act) {
    const double ops = 2.0 * double(m->rows) * double(cols) * nx;
    st.counters["GOPS"] = benchmark::Counter(ops * st.iterations() / 1e9, benchmark::Counter::kIsRate);
  }
}

bool k_has_int8(const KernelTable& kt, TensorType t) {
  const TypeKernels& k = kt.for_type(t);
  return k.act_type != TensorType::F32 && k.gemm_q8 != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::mt19937 rng(42);
  const TensorType types[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                              TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q2_K,
                              TensorType::Q3_K, TensorType::Q5_K, TensorType::IQ4_NL, TensorType::IQ4_XS,
                              TensorType::F16, TensorType::BF16, TensorType::F32};
  const int64_t shapes[][2] = {{576, 1536}, {1536, 576}};
  static std::vector<Mat> mats;  // referenced by the registered benchmarks
  mats.reserve(30);
  for (TensorType t : types)
    for (const auto& s : shapes)  // K-quant rows must be whole 256-element blocks (576 is not)
      if (row_bytes(static_cast<uint32_t>(t), s[1])) mats.push_back(make_matrix(t, s[0], s[1], rng));

  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avxvnni, Isa::avx512, Isa::neon, Isa::neon_dotprod, Isa::neon_i8mm}) {
    const KernelTable* kt = kernels_for(isa);
    if (!kt) continue;
    for (const Mat& m : mats) {
      const std::string base = std::string(isa_name(isa)) + "/" + type_traits(uint32_t(m.type))->name + "/" +
                               std::to_string(m.rows) + "x" + std::to_string(m.cols) + "/";
      auto reg = [&](const char* name, Kind kind, int nx) {
        benchmark::RegisterBenchmark((base + name).c_str(), run, kt, &m, kind, nx)->Unit(benchmark::kMicrosecond);
      };
      reg("int8", Kind::int8, 1);
      reg("deq+dot", Kind::deq_dot, 1);
      reg("f32", Kind::f32, 1);
      reg("f32_multi/4", Kind::f32_multi, 4);
      reg("f32_multi/8", Kind::f32_multi, 8);
      reg("f32_rows/64", Kind::f32_rows, 64);
      reg("f32_gemm/64", Kind::f32_gemm, 64);
      if (k_has_int8(*kt, m.type)) {
        reg("int8_loop/64", Kind::int8_loop, 64);
        reg("gemm/64", Kind::gemm, 64);
      }
      // Decode as matmul runs it, for the int16 types: int16 against int8 and exact.
      if (kt->for_type(m.type).vec_dot_i16act_tile) {
        for (int nx : {1, 4, 5, 6, 8}) {
          const std::string sfx = nx == 1 ? "" : "/" + std::to_string(nx);
          if (k_has_int8(*kt, m.type)) reg(("int8_rows" + sfx).c_str(), Kind::int8_rows, nx);
          reg(("f32_rows" + sfx).c_str(), Kind::f32_rows, nx);
          reg(("int16" + sfx).c_str(), Kind::int16, nx);
          if (nx > 1) reg(("i16_gemm" + sfx).c_str(), Kind::i16_gemm, nx);
          if (kt->for_type(m.type).gemm_i16_panels) reg(("i16_panels/" + std::to_string(nx)).c_str(), Kind::i16_panels, nx);
        }
        reg("int16/64", Kind::int16, 64);
        reg("i16_gemm/64", Kind::i16_gemm, 64);
        if (kt->for_type(m.type).gemm_i16_panels) reg("i16_panels/64", Kind::i16_panels, 64);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
