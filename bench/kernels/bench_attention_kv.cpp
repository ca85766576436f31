// Micro-benchmarks of the KV-cache segment kernels (KernelTable::attn_seg_*), one thread.
//
// n_q query heads (1, or 3 = SmolLM2's grouped-query group: names ending in _q3) over n
// cached tokens in one segment (q4: one call per 32-token group), cache of 3 kv-heads
// (SmolLM2-135M layout), reading kv-head 1. ns/tok is per cached token for all n_q heads together: a _q3 case
// below 3x its single-head twin is the saving from reading and decoding the cache once. bytes_per_second = K + V bytes of this head read
// per call, scales included (f32 4 B, f16 2 B, q8 1 B + 4 B / 64, q4 0.5 B + per-group /
// per-token fp16 scale and min). At 4096 tokens x hd 64 the whole 3-head cache is
// 1.5-6 MB (f16 3 MB): L2/L3 resident, so this is kernel throughput.
//
//   bench_attention_kv --benchmark_filter='avx512/.*n4096'   (names: isa/kernel[_q3]/hdH/nN)
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
constexpr int kMaxBenchQ = 3;
enum class Kind { f32, f16, q8, q4 };

void run(benchmark::State& st, const KernelTable* kt, Kind kind, int hd, int n, int n_q) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int G = kKvQ4GroupTokens, ng = (n + G - 1) / G;
  const int64_t row = int64_t(kKvHeads) * hd, srow = row / kKvQ8Group;
  std::vector<float> q(size_t(n_q) * size_t(hd)), k(static_cast<size_t>(ng * G * row)), v(k.size()), out(q.size());
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  std::vector<uint16_t> kh(k.size()), vh(v.size());
  for (size_t i = 0; i < k.size(); ++i) kh[i] = fp32_to_fp16(k[i]), vh[i] = fp32_to_fp16(v[i]);
  std::vector<int8_t> k8(k.size()), v8(v.size());
  std::vector<float> ks8(size_t(ng * G * srow)), vs8(ks8.size());
  for (int t = 0; t < ng * G; ++t) {
    kv_quantize_q8(&k[size_t(t * row)], int(row), &k8[size_t(t * row)], &ks8[size_t(t * srow)]);
    kv_quantize_q8(&v[size_t(t * row)], int(row), &v8[size_t(t * row)], &vs8[size_t(t * srow)]);
  }
  // q4, one layout per group: [head][hd] scale/min, [token][head][hd/2] codes, [token][head][hd/32] value scale/min
  const int64_t crow = row / 2, vsrow = row / 32;
  std::vector<uint16_t> k4s(size_t(ng * row)), k4m(k4s.size()), v4s(size_t(ng * G * vsrow)), v4m(v4s.size());
  std::vector<uint8_t> k4c(size_t(ng * G * crow)), v4c(k4c.size());
  std::vector<KvQ4GroupView> views;
  for (int g = 0; g < ng; ++g) {
    for (int h = 0; h < kKvHeads; ++h) {
      kv_quantize_q4_keys(&kh[size_t(g * G * row + h * hd)], row, hd, &k4c[size_t(g * G * crow + h * hd / 2)], crow,
                          &k4s[size_t(g * row + h * hd)], &k4m[size_t(g * row + h * hd)]);
      for (int t = g * G; t < (g + 1) * G; ++t)
        kv_quantize_q4_values(&v[size_t(t * row + h * hd)], hd, &v4c[size_t(t * crow + h * hd / 2)],
                              &v4s[size_t(t * vsrow + h * hd / 32)], &v4m[size_t(t * vsrow + h * hd / 32)]);
    }
    views.push_back({&k4s[size_t(g * row + hd)], &k4m[size_t(g * row + hd)], &k4c[size_t(g * G * crow + hd / 2)],
                     &v4s[size_t(g * G * vsrow + hd / 32)], &v4m[size_t(g * G * vsrow + hd / 32)],
                     &v4c[size_t(g * G * crow + hd / 2)], crow, vsrow});
  }
  const float scale = 1.0f / std::sqrt(float(hd));
  const int64_t off = hd;  // kv-head 1
  AttnAccum a[kMaxBenchQ];
  for (auto _ : st) {
    for (int j = 0; j < n_q; ++j) attn_accum_init(a[j], hd);
    switch (kind) {
      case Kind::f32: kt->attn_seg_f32(q.data(), n_q, &k[off], &v[off], row, n, hd, scale, a); break;
      case Kind::f16: kt->attn_seg_f16(q.data(), n_q, &kh[off], &vh[off], row, n, hd, scale, a); break;
      case Kind::q8:
        kt->attn_seg_q8(q.data(), n_q, &k8[off], &ks8[size_t(srow / kKvHeads)], &v8[off],
                        &vs8[size_t(srow / kKvHeads)], row, srow, n, hd, scale, a);
        break;
      case Kind::q4:
        for (int g = 0; g < ng; ++g)
          kt->attn_seg_q4(q.data(), n_q, views[size_t(g)], 0, std::min(G, n - g * G), hd, scale, a);
        break;
    }
    for (int j = 0; j < n_q; ++j) attn_accum_finish(a[j], hd, &out[size_t(j) * size_t(hd)]);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  double bytes_per_token = 0;
  switch (kind) {
    case Kind::f32: bytes_per_token = 8.0 * hd; break;
    case Kind::f16: bytes_per_token = 4.0 * hd; break;
    case Kind::q8: bytes_per_token = 2.0 * hd + 8.0 * hd / kKvQ8Group; break;
    case Kind::q4: bytes_per_token = hd + 4.0 * hd / G + 4.0 * hd / 32; break;
  }
  st.SetBytesProcessed(int64_t(bytes_per_token * n * double(st.iterations())));
  st.counters["ns/tok"] = benchmark::Counter(double(n) * double(st.iterations()) * 1e-9,
                                             benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

int main(int argc, char** argv) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon, Isa::neon_dotprod}) {
    const KernelTable* kt = kernels_for(isa);
    if (!kt) continue;
    for (int hd : {64, 128})
      for (int n : {512, 4096}) {
        const std::string tail = "/hd" + std::to_string(hd) + "/n" + std::to_string(n);
        auto reg = [&](const char* name, Kind kind, int n_q) {
          benchmark::RegisterBenchmark((std::string(isa_name(isa)) + "/" + name + tail).c_str(), run, kt, kind, hd, n,
                                       n_q)
              ->Unit(benchmark::kMicrosecond);
        };
        reg("seg_f32", Kind::f32, 1);
        reg("seg_f16", Kind::f16, 1);
        reg("seg_q8", Kind::q8, 1);
        reg("seg_q4", Kind::q4, 1);
        reg("seg_f32_q3", Kind::f32, 3);
        reg("seg_f16_q3", Kind::f16, 3);
        reg("seg_q8_q3", Kind::q8, 3);
        reg("seg_q4_q3", Kind::q4, 3);
      }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
