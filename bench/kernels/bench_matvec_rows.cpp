// Decode matvec micro-benchmark: TypeKernels::vec_dot_rows / vec_dot_f32_rows against the
// per-row loop they replace (vec_dot / vec_dot_f32 once per weight row), one thread,
// SmolLM2-135M shapes (rows x cols = 1536x576 and 576x1536), Q4_0 / Q4_1 / Q8_0.
//
// Names: isa/type/shape/{loop,rows}_{int8,f32}/{hot,cold}, isa/type/shape/multi_int8_xN/{hot,cold}
// (N activation rows of a batched decode step: vec_dot_rows_multi), and for the exact path
// isa/type/shape/multi_f32_xN (vec_dot_f32_multi per weight row, the kernel before the tile)
// and isa/type/shape/rows_multi_f32_xN (vec_dot_f32_rows_multi: the register tile)
//   hot   one matrix (0.5-1 MB), cache resident: kernel throughput
//   cold  a ring of copies totalling ~96 MB, a different copy every pass: streaming
//         from DRAM as in real decode (one thread, so below the machine's total bandwidth)
// Rows are processed in chunks of 64 (about what matmul_group hands a thread).
// bytes_per_second = weight bytes read per pass.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/panel.h"
#include "quant/reference.h"

using namespace pllm;

namespace {

constexpr int kChunk = 64;

struct Setup {
  int64_t rows, cols;
  size_t rb, mat_bytes;
  int copies;
  std::vector<uint8_t> w;
  std::vector<float> x;
  std::vector<uint8_t> xq;
  std::vector<float> y;
};

Setup make(const TypeKernels& k, TensorType t, int64_t rows, int64_t cols, bool cold) {
  Setup s;
  s.rows = rows;
  s.cols = cols;
  s.rb = *row_bytes(static_cast<uint32_t>(t), cols);
  s.mat_bytes = s.rb * rows;
  s.copies = cold ? int((96u << 20) / s.mat_bytes) + 1 : 1;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(cols);
  s.w.resize(s.mat_bytes * s.copies);
  for (int64_t r = 0; r < rows * s.copies; ++r) {
    for (auto& v : row) v = nd(rng) * 0.5f;
    void* dst = s.w.data() + r * s.rb;
    switch (t) {
      case TensorType::Q4_0: ref::quantize_row_q4_0(row.data(), static_cast<block_q4_0*>(dst), cols); break;
      case TensorType::Q4_1: ref::quantize_row_q4_1(row.data(), static_cast<block_q4_1*>(dst), cols); break;
      default: ref::quantize_row_q8_0(row.data(), static_cast<block_q8_0*>(dst), cols); break;
    }
  }
  s.x.resize(cols);
  for (auto& v : s.x) v = nd(rng);
  s.xq.resize(k.act_bytes(cols));
  k.quantize_act(s.x.data(), s.xq.data(), cols);
  s.y.resize(rows);
  return s;
}

// The same matrices repacked into 16-row panels (quant/panel.h), decoded by vec_dot_panels
// in chunks of kChunk rows as matmul_group hands them out.
void run_panels(benchmark::State& st, const TypeKernels* k, TensorType t, int64_t rows, int64_t cols, bool cold) {
  Setup s = make(*k, t, rows, cols, cold);
  std::vector<uint8_t> packed(s.w.size());
  for (size_t r0 = 0; r0 < size_t(rows) * s.copies; r0 += kPanelRows)
    pack_panel(t, s.w.data() + r0 * s.rb, s.rb, cols, packed.data() + r0 * s.rb);
  int c = 0;
  for (auto _ : st) {
    const uint8_t* w = packed.data() + size_t(c) * s.mat_bytes;
    if (++c == s.copies) c = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk)
      k->vec_dot_panels(cols, w + r0 * s.rb, int(kChunk / kPanelRows), s.xq.data(), s.y.data() + r0);
    benchmark::DoNotOptimize(s.y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(s.mat_bytes));
}

void run(benchmark::State& st, const TypeKernels* k, TensorType t, int64_t rows, int64_t cols, bool rows_kernel,
         bool f32, bool cold) {
  Setup s = make(*k, t, rows, cols, cold);
  int c = 0;
  for (auto _ : st) {
    const uint8_t* w = s.w.data() + size_t(c) * s.mat_bytes;
    if (++c == s.copies) c = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int nr = int(rows - r0 < kChunk ? rows - r0 : kChunk);
      const uint8_t* wr = w + r0 * s.rb;
      float* y = s.y.data() + r0;
      if (rows_kernel) {
        if (f32) k->vec_dot_f32_rows(cols, wr, s.rb, nr, s.x.data(), y);
        else k->vec_dot_rows(cols, wr, s.rb, nr, s.xq.data(), y);
      } else {
        for (int r = 0; r < nr; ++r)
          y[r] = f32 ? k->vec_dot_f32(cols, wr + r * s.rb, s.x.data()) : k->vec_dot(cols, wr + r * s.rb, s.xq.data());
      }
    }
    benchmark::DoNotOptimize(s.y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(s.mat_bytes));
}

// A batched decode step: vec_dot_rows_multi over n_x activation rows (copies of one row),
// in chunks of kChunk weight rows. items_per_second = (weight row, activation row) dots.
void run_multi(benchmark::State& st, const TypeKernels* k, TensorType t, int64_t rows, int64_t cols, int n_x, bool cold) {
  Setup s = make(*k, t, rows, cols, cold);
  const size_t xs = s.xq.size();
  std::vector<uint8_t> xq(xs * n_x);
  for (int x = 0; x < n_x; ++x) std::copy(s.xq.begin(), s.xq.end(), xq.begin() + x * xs);
  std::vector<float> y(size_t(rows) * n_x);
  int c = 0;
  for (auto _ : st) {
    const uint8_t* w = s.w.data() + size_t(c) * s.mat_bytes;
    if (++c == s.copies) c = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int nr = int(rows - r0 < kChunk ? rows - r0 : kChunk);
      k->vec_dot_rows_multi(cols, w + r0 * s.rb, s.rb, nr, xq.data(), xs, n_x, y.data() + r0, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(s.mat_bytes));
  st.SetItemsProcessed(int64_t(st.iterations()) * rows * n_x);
}

// The exact path of the same step (f32 activations): vec_dot_f32_multi per weight row over
// groups of up to 4 activation rows, as matmul_group runs it.
void run_multi_f32(benchmark::State& st, const TypeKernels* k, TensorType t, int64_t rows, int64_t cols, int n_x,
                   bool cold) {
  Setup s = make(*k, t, rows, cols, cold);
  std::vector<float> x(size_t(cols) * n_x);
  for (int j = 0; j < n_x; ++j) std::copy(s.x.begin(), s.x.end(), x.begin() + j * cols);
  std::vector<float> y(size_t(rows) * n_x);
  int c = 0;
  for (auto _ : st) {
    const uint8_t* w = s.w.data() + size_t(c) * s.mat_bytes;
    if (++c == s.copies) c = 0;
    for (int j0 = 0; j0 < n_x; j0 += 4) {
      const int nj = n_x - j0 < 4 ? n_x - j0 : 4;
      for (int64_t r = 0; r < rows; ++r)
        k->vec_dot_f32_multi(cols, w + r * s.rb, x.data() + j0 * cols, cols, nj, y.data() + j0 * rows + r, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(s.mat_bytes));
  st.SetItemsProcessed(int64_t(st.iterations()) * rows * n_x);
}

// The same step through vec_dot_f32_rows_multi (a register tile of weight rows x activation
// rows, as matmul_group runs a batched exact decode step now), in chunks of kChunk weight rows.
void run_rows_multi_f32(benchmark::State& st, const TypeKernels* k, TensorType t, int64_t rows, int64_t cols, int n_x,
                        bool cold) {
  Setup s = make(*k, t, rows, cols, cold);
  std::vector<float> x(size_t(cols) * n_x);
  for (int j = 0; j < n_x; ++j) std::copy(s.x.begin(), s.x.end(), x.begin() + j * cols);
  std::vector<float> y(size_t(rows) * n_x);
  int c = 0;
  for (auto _ : st) {
    const uint8_t* w = s.w.data() + size_t(c) * s.mat_bytes;
    if (++c == s.copies) c = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
      const int nr = int(rows - r0 < kChunk ? rows - r0 : kChunk);
      k->vec_dot_f32_rows_multi(cols, w + r0 * s.rb, s.rb, nr, x.data(), cols, n_x, y.data() + r0, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(s.mat_bytes));
  st.SetItemsProcessed(int64_t(st.iterations()) * rows * n_x);
}

void register_all() {
  const Isa isas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::neon_dotprod, Isa::neon_i8mm};
  const TensorType types[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0};
  const int64_t shapes[][2] = {{1536, 576}, {576, 1536}};
  for (Isa isa : isas) {
    const KernelTable* kt = kernels_for(isa);
    if (!kt || isa == Isa::scalar) continue;
    for (TensorType t : types) {
      const TypeKernels* k = &kt->for_type(t);
      // isa/type/RxC/what/{hot,cold}
      auto name = [&](const int64_t* sh, const std::string& what, int cold) {
        return std::string(isa_name(isa)) + "/" + type_traits(static_cast<uint32_t>(t))->name + "/" +
               std::to_string(sh[0]) + "x" + std::to_string(sh[1]) + "/" + what + (cold ? "/cold" : "/hot");
      };
      for (const auto& sh : shapes)
        for (int cold = 0; cold < 2; ++cold) {
          for (int f32 = 0; f32 < 2; ++f32)
            for (int rk = 0; rk < 2; ++rk)
              benchmark::RegisterBenchmark(name(sh, std::string(rk ? "rows" : "loop") + (f32 ? "_f32" : "_int8"), cold).c_str(),
                                           run, k, t, sh[0], sh[1], rk != 0, f32 != 0, cold != 0);
          for (int n_x : {2, 4, 8}) {
            benchmark::RegisterBenchmark(name(sh, "multi_int8_x" + std::to_string(n_x), cold).c_str(), run_multi, k, t,
                                         sh[0], sh[1], n_x, cold != 0);
            benchmark::RegisterBenchmark(name(sh, "multi_f32_x" + std::to_string(n_x), cold).c_str(), run_multi_f32, k,
                                         t, sh[0], sh[1], n_x, cold != 0);
            benchmark::RegisterBenchmark(name(sh, "rows_multi_f32_x" + std::to_string(n_x), cold).c_str(),
                                         run_rows_multi_f32, k, t, sh[0], sh[1], n_x, cold != 0);
          }
          if (k->vec_dot_panels)
            benchmark::RegisterBenchmark(name(sh, "panels_int8", cold).c_str(), run_panels, k, t, sh[0], sh[1],
                                         cold != 0);
        }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
