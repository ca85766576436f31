// Run-time ISA selection: builds one table per runnable ISA, once.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "kernels/internal.h"

#if defined(PLLM_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif

namespace pllm {

namespace {

#if defined(PLLM_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
// F16C is CPUID leaf 1, ECX bit 29. Asked directly: clang's __builtin_cpu_supports does not
// know "f16c" (the fuzz build compiles with clang).
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

// AVX-VNNI (the VEX-encoded vpdpwssd / vpdpbusd) is CPUID leaf 7 subleaf 1, EAX bit 4; asked
// directly for the same reason. Its ymm registers are AVX2's, whose OS support (XSAVE of the ymm
// state) the avx2 check covers.
bool cpu_has_avxvnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
}
#endif

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
#if defined(PLLM_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
    case Isa::avx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case Isa::avxvnni:
      return cpu_supports(Isa::avx2) && cpu_has_avxvnni();
    case Isa::avx512:
      __builtin_cpu_init();
      return cpu_supports(Isa::avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
#endif
#if defined(PLLM_HAVE_ARM_KERNELS) && defined(__aarch64__)
    case Isa::neon:
      return true;  // Advanced SIMD is mandatory on AArch64
    case Isa::neon_dotprod:
#if defined(__linux__)
      return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
      return false;
#endif
    case Isa::neon_i8mm:  // SMMLA; the rest of the table is the dotprod one
#if defined(__linux__)
      return cpu_supports(Isa::neon_dotprod) && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#else
      return false;
#endif
#endif
    default:
      return false;
  }
}

#if defined(PLLM_HAVE_ARM_KERNELS)
// FP16 arithmetic (FMLA .8h) for the W4A16 dots wherever the CPU has it, whatever the level.
void fill_f16act_fp16_if_present(KernelTable& k) {
#if defined(__aarch64__) && defined(__linux__)
  if ((getauxval(AT_HWCAP) & HWCAP_ASIMDHP) != 0) kern::fill_f16act_neon_fp16(k);
#else
  (void)k;
#endif
}
#endif

// The fillers of each table, in the order they run: a later one overrides what an earlier one
// set. Each SIMD table starts from a copy of the scalar table with the entries build_tables
// clears, so a level lists only what it implements. A kernel family of a level is one line.
using kern::Filler;
constexpr std::array<Filler, 8> kScalar = {
    kern::fill_scalar,
    kern::fill_attention_kv_scalar,
    kern::fill_gemm_loops<Isa::scalar>,
    kern::fill_rows_loops<Isa::scalar>,
    kern::fill_rows_f32_multi_scalar,
    kern::fill_f16act_scalar,
    kern::fill_i16act_scalar,
    kern::fill_panel_scalar,
};

// a's fillers, then b's.
template <size_t A, size_t B>
constexpr std::array<Filler, A + B> then(const std::array<Filler, A>& a, const std::array<Filler, B>& b) {
  std::array<Filler, A + B> r{};
  for (size_t i = 0; i < A; ++i) r[i] = a[i];
  for (size_t i = 0; i < B; ++i) r[A + i] = b[i];
  return r;
}

#if defined(PLLM_HAVE_X86_KERNELS)
// The avx2 level but for its int16 kernels: the start of the avx2 and avxvnni tables.
constexpr std::array<Filler, 10> kAvx2Level = {
    kern::fill_avx2,
    kern::fill_lowbit_avx2,
    kern::fill_act_quant_avx2,
    kern::fill_attention_kv_avx2,
    kern::fill_gemm_loops<Isa::avx2>,
    kern::fill_gemm_avx2,
    kern::fill_rows_loops<Isa::avx2>,
    kern::fill_rows_avx2,
    kern::fill_act_avx2,
    kern::fill_f16act_avx2,
};
constexpr auto kAvx2 = then(kAvx2Level, std::array<Filler, 2>{
                                            kern::fill_i16act_avx2,
                                            kern::fill_i16panel_avx2,
                                        });
constexpr auto kAvxVnni = then(kAvx2Level, std::array<Filler, 3>{
                                               kern::fill_i16act_avx2,  // quantize_row_q16
                                               kern::fill_i16act_avxvnni,
                                               kern::fill_i16panel_avxvnni,
                                           });
constexpr std::array<Filler, 15> kAvx512 = {
    kern::fill_avx2,  // the one-row kernels AVX-512 does not replace (K-quant and float exact mode)
    kern::fill_lowbit_avx2,
    kern::fill_act_quant_avx2,
    kern::fill_avx512,
    kern::fill_attention_kv_avx512,
    kern::fill_gemm_loops<Isa::avx512>,
    kern::fill_gemm_avx512,
    kern::fill_rows_loops<Isa::avx512>,
    kern::fill_rows_avx512,
    kern::fill_panel_avx512,
    kern::fill_act_avx2,
    kern::fill_f16act_avx2,  // 256-bit: faster on Zen 4 (f16act_avx2.cpp)
    kern::fill_i16act_avx2,  // quantize_row_q16
    kern::fill_i16act_avx512,
    kern::fill_i16panel_avx512,
};
#endif

#if defined(PLLM_HAVE_ARM_KERNELS)
constexpr std::array<Filler, 9> kNeon = {
    kern::fill_neon,
    kern::fill_lowbit_neon,
    kern::fill_attention_kv_neon,
    kern::fill_gemm_loops<Isa::neon>,
    kern::fill_rows_loops<Isa::neon>,
    kern::fill_act_neon,
    kern::fill_f16act_neon,
    fill_f16act_fp16_if_present,
    kern::fill_i16act_neon,  // SMULL/SMLAL (the dotprod table overrides the main types)
};
constexpr std::array<Filler, 13> kNeonDotprod = {
    kern::fill_neon,
    kern::fill_lowbit_neon,
    kern::fill_neon_dotprod,
    kern::fill_attention_kv_neon,
    kern::fill_gemm_loops<Isa::neon_dotprod>,
    kern::fill_gemm_neon_dotprod,
    kern::fill_rows_loops<Isa::neon_dotprod>,
    kern::fill_panel_neon_dotprod,
    kern::fill_act_neon,
    kern::fill_f16act_neon,
    fill_f16act_fp16_if_present,
    kern::fill_i16act_neon,
    kern::fill_i16act_dotprod,  // SDOT / UDOT tiles for the main types, bit for bit the SMLAL ones
};
// The dotprod table with SMMLA prefill GEMMs.
constexpr auto kNeonI8mm = then(kNeonDotprod, std::array<Filler, 1>{kern::fill_gemm_neon_i8mm});
#endif

// The fillers of a level this build has kernels for (empty otherwise).
std::span<const Filler> fillers(Isa isa) {
  switch (isa) {
    case Isa::scalar: return kScalar;
#if defined(PLLM_HAVE_X86_KERNELS)
    case Isa::avx2: return kAvx2;
    case Isa::avxvnni: return kAvxVnni;
    case Isa::avx512: return kAvx512;
#endif
#if defined(PLLM_HAVE_ARM_KERNELS)
    case Isa::neon: return kNeon;
    case Isa::neon_dotprod: return kNeonDotprod;
    case Isa::neon_i8mm: return kNeonI8mm;
#endif
    default: return {};
  }
}

struct Tables {
  KernelTable table[kIsaCount];
  bool ok[kIsaCount] = {};
};

Tables build_tables() {
  Tables t;
  for (Filler fill : fillers(Isa::scalar)) fill(t.table[0]);
  for (TypeKernels& tk : t.table[0].types) {  // the scalar twins
    tk.gemm_f32 = tk.vec_dot_f32_rows_multi;
    tk.gemm_i16 = tk.vec_dot_i16act_tile;
  }
  t.ok[0] = true;
  for (int i = 1; i < kIsaCount; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (!cpu_supports(isa) || fillers(isa).empty()) continue;
    KernelTable k = t.table[0];  // start from the scalar twins; lower levels layer first
    // Repacked panels only where this ISA has its own kernel (else the model keeps the
    // file's layout rather than run the scalar twin).
    // Likewise the int16 tiles: a type without this ISA's own tile takes the exact path.
    // The prefill GEMM must equal this table's vec_dot_f32_rows_multi bit for bit: a type whose
    // exact kernels are not this ISA's own gets that function itself (below).
    for (TypeKernels& tk : k.types) {
      tk.vec_dot_panels = nullptr;
      tk.vec_dot_i16act_tile = nullptr;
      tk.gemm_i16 = nullptr;
      tk.gemm_i16_panels = nullptr;
      tk.gemm_f32 = nullptr;
    }
    for (Filler fill : fillers(isa)) fill(k);
    for (TypeKernels& tk : k.types) {
      if (!tk.gemm_f32) tk.gemm_f32 = tk.vec_dot_f32_rows_multi;
      k.int16_prompts = k.int16_prompts || tk.gemm_i16;  // this ISA's own int16 GEMM
      if (!tk.gemm_i16) tk.gemm_i16 = tk.vec_dot_i16act_tile;
    }
    k.isa = isa;
    t.table[i] = k;
    t.ok[i] = true;
  }
  return t;
}

const Tables& tables() {
  static const Tables t = build_tables();
  return t;
}

// x86: avxvnni sits between avx2 and avx512, so a CPU with AVX-512 keeps the avx512 table (its
// zmm int16 kernels, and int8 panels) and one with AVX-VNNI but not AVX-512 gets avxvnni.
int rank(Isa isa) {
  switch (isa) {
    case Isa::scalar: return 0;
    case Isa::avx2:
    case Isa::neon: return 1;
    case Isa::avxvnni:
    case Isa::neon_dotprod: return 2;
    case Isa::avx512:
    case Isa::neon_i8mm: return 3;
  }
  return 0;
}

const KernelTable& select_table() {
  const char* env = std::getenv("PLLM_ISA");
  bool unknown = false;
  const Isa isa = select_isa(env, &unknown);
  if (unknown) {
    std::fprintf(stderr, "pocketllm: warning: unknown PLLM_ISA=\"%s\", using %s\n", env, isa_name(isa));
  }
  return tables().table[static_cast<int>(isa)];
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avxvnni: return "avxvnni";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
    case Isa::neon_dotprod: return "dotprod";
    case Isa::neon_i8mm: return "i8mm";
  }
  return "unknown";
}

Isa select_isa(const char* request, bool* unknown) {
  if (unknown) *unknown = false;
  int cap = 3;  // the highest rank
  if (request && *request) {
    static const struct { const char* name; Isa isa; } kNames[] = {
        {"scalar", Isa::scalar},  {"avx2", Isa::avx2},           {"avxvnni", Isa::avxvnni},
        {"avx512", Isa::avx512},  {"neon", Isa::neon},           {"dotprod", Isa::neon_dotprod},
        {"neon_dotprod", Isa::neon_dotprod}, {"i8mm", Isa::neon_i8mm}, {"neon_i8mm", Isa::neon_i8mm},
    };
    bool found = false;
    for (const auto& e : kNames) {
      if (std::strcmp(request, e.name) == 0) {
        cap = rank(e.isa);
        found = true;
      }
    }
    if (!found && unknown) *unknown = true;
  }
  Isa best = Isa::scalar;
  for (int i = 1; i < kIsaCount; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (tables().ok[i] && rank(isa) <= cap && rank(isa) > rank(best)) best = isa;
  }
  return best;
}

const KernelTable& kernels() {
  static const KernelTable& t = select_table();
  return t;
}

const KernelTable* kernels_for(Isa isa) {
  const int i = static_cast<int>(isa);
  if (i < 0 || i >= kIsaCount || !tables().ok[i]) return nullptr;
  return &tables().table[i];
}

}  // namespace pllm
