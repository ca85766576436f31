// Micro-benchmarks of the attention kernels (KernelTable::attn_head_f32/f16), one thread.
//
// One query head over n_pos cached positions, head_dim 64, cache layout
// [pos][n_kv_heads * head_dim] with 3 kv-heads (SmolLM2-135M), reading kv-head 1.
//   attn_f32 / attn_f16   the chunked online-softmax kernels
//   old_dot_axpy          the previous model path (arch_llama.cpp attend_head):
//                         dot_f32 + std::exp + axpy_f32 per position (f32 cache only)
// bytes_per_second = K + V bytes of this head read per call (2 * n_pos * head_dim *
// element size). The cache of all heads is 1.5-6 MB (L2/L3 resident): kernel
// throughput, not DRAM bandwidth.
//
//   bench_attention --benchmark_filter='avx2'   (names: isa/kernel/hdH/nN)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"

using namespace pllm;

namespace {

constexpr int kKvHeads = 3;

enum class Kind { f32, f16, old_dot_axpy };

// The previous per-position path, kept here for comparison.
void old_attend(const KernelTable& kt, const float* q, const float* k, const float* v, int64_t stride, int n_pos,
                int hd, float scale, float* out) {
  float acc[256];
  std::fill(acc, acc + hd, 0.0f);
  float m = -INFINITY, l = 0.0f;
  for (int t = 0; t < n_pos; ++t) {
    const float s = kt.dot_f32(q, k + t * stride, hd) * scale;
    if (s > m) {
      const float r = std::exp(m - s);
      for (int d = 0; d < hd; ++d) acc[d] *= r;
      l *= r;
      m = s;
    }
    const float w = std::exp(s - m);
    l += w;
    kt.axpy_f32(w, v + t * stride, acc, hd);
  }
  for (int d = 0; d < hd; ++d) out[d] = acc[d] / l;
}

void run(benchmark::State& st, const KernelTable* kt, Kind kind, int hd, int n_pos) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t stride = int64_t(kKvHeads) * hd;
  std::vector<float> q(static_cast<size_t>(hd)), k(static_cast<size_t>(n_pos * stride)), v(k.size()),
      out(static_cast<size_t>(hd));
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  std::vector<uint16_t> kh(k.size()), vh(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    kh[i] = fp32_to_fp16(k[i]);
    vh[i] = fp32_to_fp16(v[i]);
  }
  const float scale = 1.0f / std::sqrt(float(hd));
  const int64_t off = hd;  // kv-head 1
  for (auto _ : st) {
    switch (kind) {
      case Kind::f32:
        kt->attn_head_f32(q.data(), k.data() + off, v.data() + off, stride, n_pos, hd, scale, out.data());
        break;
      case Kind::f16:
        kt->attn_head_f16(q.data(), kh.data() + off, vh.data() + off, stride, n_pos, hd, scale, out.data());
        break;
      case Kind::old_dot_axpy:
        old_attend(*kt, q.data(), k.data() + off, v.data() + off, stride, n_pos, hd, scale, out.data());
        break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double elem = kind == Kind::f16 ? 2.0 : 4.0;
  st.SetBytesProcessed(int64_t(2.0 * n_pos * hd * elem * double(st.iterations())));
  st.counters["ns/pos"] =
      benchmark::Counter(double(n_pos) * double(st.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

int main(int argc, char** argv) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::neon_dotprod, Isa::neon_i8mm}) {
    const KernelTable* kt = kernels_for(isa);
    if (!kt) continue;
    for (int n_pos : {512, 2048}) {
      const int hd = 64;
      const std::string tail = "/hd" + std::to_string(hd) + "/n" + std::to_string(n_pos);
      auto reg = [&](const char* name, Kind kind) {
        benchmark::RegisterBenchmark((std::string(isa_name(isa)) + "/" + name + tail).c_str(), run, kt, kind, hd,
                                     n_pos)
            ->Unit(benchmark::kMicrosecond);
      };
      reg("attn_f32", Kind::f32);
      reg("attn_f16", Kind::f16);
      reg("old_dot_axpy", Kind::old_dot_axpy);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
