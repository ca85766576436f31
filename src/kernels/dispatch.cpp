// Run-time ISA selection: builds one table per runnable ISA, once.
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

constexpr int kNumIsa = 7;

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

// FP16 arithmetic (FMLA .8h) for the W4A16 kernels; independent of the ISA level.
bool cpu_has_fp16_arith() {
#if defined(PLLM_HAVE_ARM_KERNELS) && defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDHP) != 0;
#else
  return false;
#endif
}

// W4A16 kernels of each table (filled after everything else).
void fill_f16act(KernelTable& k, Isa isa) {
  switch (isa) {
#if defined(PLLM_HAVE_X86_KERNELS)
    case Isa::avx2:
    case Isa::avxvnni:
    case Isa::avx512: kern::fill_f16act_avx2(k); break;  // 256-bit: faster on Zen 4 (f16act_avx2.cpp)
#endif
#if defined(PLLM_HAVE_ARM_KERNELS)
    case Isa::neon:
    case Isa::neon_dotprod:
    case Isa::neon_i8mm:
      kern::fill_f16act_neon(k);
      if (cpu_has_fp16_arith()) kern::fill_f16act_neon_fp16(k);
      break;
#endif
    default: break;  // scalar: already filled with the twins
  }
}

// int16-activation kernels of each table (filled after fill_f16act). The tiles were cleared
// for every SIMD table: a type gets one here only where this ISA has its own kernel. The avxvnni
// and avx512 tables take quantize_row_q16 from i16act_avx2.cpp and their own tiles, GEMMs and
// panel kernels (vpdpwssd on ymm / zmm; the same results bit for bit); every ARM level the
// baseline NEON ones.
void fill_i16act(KernelTable& k, Isa isa) {
  switch (isa) {
#if defined(PLLM_HAVE_X86_KERNELS)
    case Isa::avx2: kern::fill_i16act_avx2(k); kern::fill_i16panel_avx2(k); break;
    case Isa::avxvnni: kern::fill_i16act_avx2(k); kern::fill_i16act_avxvnni(k); kern::fill_i16panel_avxvnni(k); break;
    case Isa::avx512: kern::fill_i16act_avx2(k); kern::fill_i16act_avx512(k); kern::fill_i16panel_avx512(k); break;
#endif
#if defined(PLLM_HAVE_ARM_KERNELS)
    case Isa::neon:
    case Isa::neon_dotprod:
    case Isa::neon_i8mm: kern::fill_i16act_neon(k); break;  // SMULL/SMLAL on every level
#endif
    default: (void)k; break;  // scalar: already filled with the twins
  }
}

struct Tables {
  KernelTable table[kNumIsa];
  bool ok[kNumIsa] = {};
};

Tables build_tables() {
  Tables t;
  kern::fill_scalar(t.table[0]);
  kern::fill_attention_kv_scalar(t.table[0]);
  kern::fill_gemm_scalar(t.table[0]);
  kern::fill_rows_scalar(t.table[0]);
  kern::fill_f16act_scalar(t.table[0]);
  kern::fill_i16act_scalar(t.table[0]);
  kern::fill_panel_scalar(t.table[0]);
  for (TypeKernels& tk : t.table[0].types) {  // the scalar twins
    tk.gemm_f32 = tk.vec_dot_f32_rows_multi;
    tk.gemm_i16 = tk.vec_dot_i16act_tile;
  }
  t.ok[0] = true;
  for (int i = 1; i < kNumIsa; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (!cpu_supports(isa)) continue;
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
    switch (isa) {
#if defined(PLLM_HAVE_X86_KERNELS)
      case Isa::avx2:
      case Isa::avxvnni:  // the avx2 table; its own int16 kernels come in fill_i16act
        kern::fill_avx2(k); kern::fill_attention_kv_avx2(k); kern::fill_gemm_avx2(k); kern::fill_rows_avx2(k); kern::fill_act_avx2(k); break;
      case Isa::avx512: kern::fill_avx2(k); kern::fill_avx512(k); kern::fill_attention_kv_avx512(k); kern::fill_gemm_avx512(k); kern::fill_rows_avx512(k); kern::fill_panel_avx512(k); kern::fill_act_avx2(k); break;
#endif
#if defined(PLLM_HAVE_ARM_KERNELS)
      case Isa::neon: kern::fill_neon(k); kern::fill_attention_kv_neon(k); kern::fill_gemm_neon(k); kern::fill_rows_neon(k); kern::fill_act_neon(k); break;
      case Isa::neon_dotprod: kern::fill_neon(k); kern::fill_neon_dotprod(k); kern::fill_attention_kv_neon(k); kern::fill_gemm_neon_dotprod(k); kern::fill_rows_neon_dotprod(k); kern::fill_panel_neon_dotprod(k); kern::fill_act_neon(k); break;
      case Isa::neon_i8mm: kern::fill_neon(k); kern::fill_neon_dotprod(k); kern::fill_attention_kv_neon(k); kern::fill_gemm_neon_i8mm(k); kern::fill_rows_neon_i8mm(k); kern::fill_panel_neon_dotprod(k); kern::fill_act_neon(k); break;
#endif
      default: continue;
    }
    fill_f16act(k, isa);
    fill_i16act(k, isa);
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
  for (int i = 1; i < kNumIsa; ++i) {
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
  if (i < 0 || i >= kNumIsa || !tables().ok[i]) return nullptr;
  return &tables().table[i];
}

}  // namespace pllm
