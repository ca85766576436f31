#!/usr/bin/env python3
"""Static cycle estimates of the kernels' inner loops with llvm-mca (issue P7).

Speed on ARM cannot be measured on the x86 build machines, so each hot loop is taken from the
assembly clang makes of the real translation unit (same ISA flags as src/kernels/CMakeLists.txt),
cut out by clang's own loop annotations ("Inner Loop Header" / "in Loop: Header=") and fed to
llvm-mca for several CPU models. Nothing is copied out of src/ and nothing is marked in it: a
kernel change shows up here on the next run. See docs/PERFORMANCE.md, "ARM estimates".

Output: a Markdown table of cycles per 32-weight block (GEMM rows: per 32-weight block and token),
and under build-mca/ the .s of every TU, the extracted loop of every row (loops/*.s) and the raw
llvm-mca reports (reports/*.txt).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["-std=c++20", "-O3", "-DNDEBUG", "-ffp-contract=off", f"-I{ROOT / 'src'}"]  # Release + kernel flags
ISA = {  # target flags per ISA, as src/kernels/CMakeLists.txt gives them to each file
    "neon": ["--target=aarch64-linux-gnu", "-march=armv8-a"],
    "dotprod": ["--target=aarch64-linux-gnu", "-march=armv8.2-a+dotprod"],
    "i8mm": ["--target=aarch64-linux-gnu", "-march=armv8.2-a+dotprod+i8mm"],
    "avx2": ["--target=x86_64-linux-gnu", "-mavx2", "-mfma", "-mf16c"],
    "avx512": ["--target=x86_64-linux-gnu", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mavx2",
               "-mfma", "-mf16c"],
}
ARM_CPUS = ["cortex-a55", "cortex-a76", "neoverse-n1"]  # LLVM gives cortex-a76 the Cortex-A57 model; N1 is A76-based
I8MM_CPUS = ["cortex-a510", "cortex-a710"]             # cores that have i8mm (A55/A76 do not)
X86_CPUS = {"avx2": "znver3", "avx512": "znver4"}      # znver4 needs LLVM >= 17 (fallback below)
# Per-file flags src/kernels/CMakeLists.txt adds for clang (without them clang leaves the int16
# driver's row loops rolled, the states on the stack: not the code a clang build runs).
TU_FLAGS = {"arm/i16act_neon.cpp": ["-mllvm", "-unroll-threshold=2000"],
            "arm/i16act_dotprod.cpp": ["-mllvm", "-unroll-threshold=2000"]}

# One row of the table per (label, arm loop, x86 AVX2 loop, x86 AVX-512 loop). A loop is
# (isa, TU under src/kernels, substring of the demangled function, units per loop iteration):
# units = 32-weight blocks one iteration consumes, times tokens for the GEMM micro-kernels.
# Which function runs is the dispatch tables' choice (fill_* in each TU, fill_rows_*): e.g. x86
# exact Q4_0 decode is ExactRows<4 rows>, Q4_K exact is the one-row fused_dot of AVX2 in both
# x86 tables. The largest innermost loop of the function is taken (the 4-row / full-tile case).
# Optional after units: trips (constant-trip loops left rolled inside, see loop_bodies) and an op
# the loop must contain (to pass over a larger scalar tail loop).
def fd(isa_ns, dec):  # one_row calls fused_dot<.., 1, ..> where it did not inline it
    return (f"one_row<pllm::kern::drivers::FusedDot<pllm::kern::{isa_ns}, pllm::kern::{dec}>::K, float>",
            f"fused_dot<pllm::kern::{isa_ns}, 1, pllm::kern::{dec}, float>")

def bd(t):  # the int8 block-dot driver instantiated for NEON / dotprod (drivers/block_dot.h)
    return f"block_dot<pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::Dot<pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::{t},"

NEON_T = ("pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::Gemm<pllm::kern::neon_int8::Blocks<"
          "pllm::kern::(anonymous namespace)::Level>::{t}>")
# The SDOT micro-kernel: outlined (micro_nx, shared by gemm_q8 and gemm_q8_panels) or inlined.
def gq8_neon(t):
    return ("drivers::micro_nx<pllm::kern::(anonymous namespace)::Tiles, " + NEON_T.format(t=t) + ", 1>",
            "drivers::gemm_q8<pllm::kern::(anonymous namespace)::Tiles, " + NEON_T.format(t=t) + ", false>")
MICRO = "Tiles::micro<pllm::kern::(anonymous namespace)::"  # AVX-512: an outlined function
GQ8 = "drivers::gemm_q8<pllm::kern::(anonymous namespace)::Tiles, pllm::kern::(anonymous namespace)::"  # micro inlined
PNL = "panels<pllm::kern::(anonymous namespace)::"  # arm/panel_dotprod.cpp
I16 = "drivers::i16_rows_nx<pllm::kern::(anonymous namespace)::S16, pllm::kern::(anonymous namespace)::"
I16D = ("drivers::i16_rows_nx_outlined<pllm::kern::(anonymous namespace)::{s}, pllm::kern::(anonymous namespace)::{m}, 1>")
PACK = "drivers::gemm_q8<pllm::kern::(anonymous namespace)::Tiles, pllm::kern::x86_gemm::Pack<pllm::kern::(anonymous namespace)::Panel, "

ROWS = [
    ("decode exact Q4_0", ("neon", "arm/neon.cpp", fd("neon::F32x4", "neon::DecQ4_0"), 1),
     ("avx2", "x86/rows_avx2.cpp", "exact_rows<pllm::kern::(anonymous namespace)::RowsSimd, pllm::kern::(anonymous namespace)::DecQ4_0>", 4),
     ("avx512", "x86/rows_avx512.cpp", "exact_rows<pllm::kern::(anonymous namespace)::RowsSimd, pllm::kern::(anonymous namespace)::DecQ4_0>", 4)),
    ("decode exact Q4_1", ("neon", "arm/neon.cpp", fd("neon::F32x4", "neon::DecQ4_1"), 1),
     ("avx2", "x86/rows_avx2.cpp", "exact_rows<pllm::kern::(anonymous namespace)::RowsSimd, pllm::kern::(anonymous namespace)::DecQ4_1>", 4),
     ("avx512", "x86/rows_avx512.cpp", "exact_rows<pllm::kern::(anonymous namespace)::RowsSimd, pllm::kern::(anonymous namespace)::DecQ4_1>", 4)),
    ("decode exact Q8_0", ("neon", "arm/neon.cpp", fd("neon::F32x4", "neon::DecQ8_0"), 1),
     ("avx2", "x86/rows_avx2.cpp", "exact_rows<pllm::kern::(anonymous namespace)::RowsSimd, pllm::kern::(anonymous namespace)::DecQ8_0>", 4),
     ("avx512", "x86/rows_avx512.cpp", "exact_rows<pllm::kern::(anonymous namespace)::RowsSimd, pllm::kern::(anonymous namespace)::DecQ8_0>", 4)),
    ("decode exact Q4_K", ("neon", "arm/neon.cpp", fd("neon::F32x4", "neon::DecQ4_K"), 8, (8,)),
     ("avx2", "x86/avx2.cpp", fd("avx2::flags_avx2::F32x8", "avx2::DecQ4_K"), 8), None),
    ("decode exact Q6_K", ("neon", "arm/neon.cpp", fd("neon::F32x4", "neon::DecQ6_K"), 8, (8, 2)),
     ("avx2", "x86/avx2.cpp", fd("avx2::flags_avx2::F32x8", "avx2::DecQ6_K"), 8, (8,)), None),
    ("decode int8 Q4_0 (NEON)", ("neon", "arm/neon.cpp", bd("Q4_0"), 1),
     ("avx2", "x86/rows_avx2.cpp", "rows_by_4<pllm::kern::(anonymous namespace)::Rows<pllm::kern::(anonymous namespace)::MQ4_0>", 4),
     ("avx512", "x86/rows_avx512.cpp", "rows_by_4<pllm::kern::(anonymous namespace)::KQ4_0", 8)),
    ("decode int8 Q4_0 (dotprod)", ("dotprod", "arm/neon_dotprod.cpp", bd("Q4_0"), 1), None, None),
    ("decode int8 Q4_1 (NEON)", ("neon", "arm/neon.cpp", bd("Q4_1"), 1),
     ("avx2", "x86/rows_avx2.cpp", "rows_by_4<pllm::kern::(anonymous namespace)::Rows<pllm::kern::(anonymous namespace)::MQ4_1>", 4),
     ("avx512", "x86/rows_avx512.cpp", "rows_by_4<pllm::kern::(anonymous namespace)::KQ4_1", 8)),
    ("decode int8 Q4_1 (dotprod)", ("dotprod", "arm/neon_dotprod.cpp", bd("Q4_1"), 1), None, None),
    ("decode int8 Q8_0 (NEON)", ("neon", "arm/neon.cpp", bd("Q8_0"), 1),
     ("avx2", "x86/rows_avx2.cpp", "rows_by_4<pllm::kern::(anonymous namespace)::Rows<pllm::kern::(anonymous namespace)::MQ8_0>", 4),
     ("avx512", "x86/rows_avx512.cpp", "rows_by_4<pllm::kern::(anonymous namespace)::KQ8_0", 8)),
    ("decode int8 Q8_0 (dotprod)", ("dotprod", "arm/neon_dotprod.cpp", bd("Q8_0"), 1), None, None),
    # Over load-time panels (quant/panel.h): one iteration is one block of 16 rows.
    ("decode int8 Q4_0 panels (SDOT / VNNI)", ("dotprod", "arm/panel_dotprod.cpp", PNL + "Q40>", 16), None,
     ("avx512", "x86/panel_avx512.cpp", "::panels_q4_0(", 16)),
    ("decode int8 Q4_1 panels (SDOT / VNNI)", ("dotprod", "arm/panel_dotprod.cpp", PNL + "Q41>", 16), None,
     ("avx512", "x86/panel_avx512.cpp", "::panels_q4_1(", 16)),
    ("decode int8 Q8_0 panels (SDOT / VNNI)", ("dotprod", "arm/panel_dotprod.cpp", PNL + "Q80>", 16), None,
     ("avx512", "x86/panel_avx512.cpp", "::panels_q8_0(", 16)),
    ("decode int8 Q4_K (NEON)", ("neon", "arm/neon.cpp", "::vec_dot_q4_K(", 8, (4,)),
     ("avx2", "x86/avx2.cpp", "::vec_dot_q4_K(", 8), ("avx512", "x86/avx512.cpp", "::vec_dot_q4_K(", 8)),
    ("decode int8 Q4_K (dotprod)", ("dotprod", "arm/neon_dotprod.cpp", "::vec_dot_q4_K(", 8), None, None),
    ("decode int8 Q6_K (NEON)", ("neon", "arm/neon.cpp", "::vec_dot_q6_K(", 8, (2, 4)),
     ("avx2", "x86/avx2.cpp", "::vec_dot_q6_K(", 8), ("avx512", "x86/avx512.cpp", "::vec_dot_q6_K(", 8)),
    ("decode int8 Q6_K (dotprod)", ("dotprod", "arm/neon_dotprod.cpp", "::vec_dot_q6_K(", 8), None, None),
    # The default decode (int16 activations, arm/i16act_neon.cpp; baseline NEON in every ARM table,
    # SMULL/SMLAL): one activation row, so the tile is 2 weight rows (tile_rows(1)) and one
    # iteration of the group loop is 8 units of each: 16 units.
    ("decode int16 Q4_0 (NEON, every ARM level)", ("neon", "arm/i16act_neon.cpp", I16 + "MQ4<pllm::block_q4_0, 8>, 1>", 16),
     None, None),
    ("decode int16 Q8_0 (NEON, every ARM level)", ("neon", "arm/i16act_neon.cpp", I16 + "MQ8_0, 1>", 16), None, None),
    ("decode int16 Q4_K (NEON, every ARM level)", ("neon", "arm/i16act_neon.cpp",
                                                    I16 + "MKScaleMin<pllm::block_q4_K>, 1>", 16), None, None),
    ("decode int16 Q6_K (NEON, every ARM level)", ("neon", "arm/i16act_neon.cpp", I16 + "MQ6_K, 1>", 16), None, None),
    # The same tiles on SDOT / UDOT (arm/i16act_dotprod.cpp; the dotprod and i8mm tables), bit for
    # bit the NEON ones; the activation split (once per call and activation row) is not counted.
    # Q6_K's tile is one weight row (tile_rows): 8 units per iteration.
    ("decode int16 Q4_0 (SDOT/UDOT: dotprod, i8mm)", ("dotprod", "arm/i16act_dotprod.cpp", I16D.format(
        s="SDot<false, 8, false, false>", m="MQ45<pllm::block_q4_0, 8, false>"), 16), None, None),
    ("decode int16 Q8_0 (SDOT/UDOT: dotprod, i8mm)", ("dotprod", "arm/i16act_dotprod.cpp", I16D.format(
        s="SDot<true, 128, true, false>", m="MQ8_0"), 16), None, None),
    ("decode int16 Q4_K (SDOT/UDOT: dotprod, i8mm)", ("dotprod", "arm/i16act_dotprod.cpp", I16D.format(
        s="SDot<false, 0, false, false>", m="MKScaleMin<pllm::block_q4_K>"), 16), None, None),
    ("decode int16 Q6_K (SDOT/UDOT: dotprod, i8mm)", ("dotprod", "arm/i16act_dotprod.cpp", I16D.format(
        s="SDot<true, 32, false, true>", m="MQ6_K"), 8), None, None),
    # Prefill micro-kernels: panel rows x tokens per K-block iteration (packing not counted).
    ("prefill GEMM Q4_0 (SDOT / AVX2 / VNNI)", ("dotprod", "arm/gemm_dotprod.cpp", gq8_neon("Q4_0"), 32),
     ("avx2", "x86/gemm_avx2.cpp", (MICRO + "Q40>", GQ8 + "Q40, false>", PACK + "8>::Q40, false>", PACK + "16>::Q40, false>"), 32),
     ("avx512", "x86/gemm_avx512.cpp", (MICRO + "Q40>", GQ8 + "Q40, false>", PACK + "8>::Q40, false>", PACK + "16>::Q40, false>"), 128)),
    ("prefill GEMM Q4_0 (SMMLA)", ("i8mm", "arm/gemm_i8mm.cpp", "gemm<pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::Gemm<pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::Q4_0>, false>", 32), None, None),
    ("prefill GEMM Q8_0 (SDOT / AVX2 / VNNI)", ("dotprod", "arm/gemm_dotprod.cpp", gq8_neon("Q8_0"), 32),
     ("avx2", "x86/gemm_avx2.cpp", (MICRO + "Q80>", GQ8 + "Q80, false>", PACK + "8>::Q80, false>", PACK + "16>::Q80, false>"), 32),
     ("avx512", "x86/gemm_avx512.cpp", (MICRO + "Q80>", GQ8 + "Q80, false>", PACK + "8>::Q80, false>", PACK + "16>::Q80, false>"), 128)),
    ("prefill GEMM Q8_0 (SMMLA)", ("i8mm", "arm/gemm_i8mm.cpp", "gemm<pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::Gemm<pllm::kern::neon_int8::Blocks<pllm::kern::(anonymous namespace)::Level>::Q8_0>, false>", 32), None, None),
]


BYTES = {"Q4_0": 18, "Q4_1": 20, "Q8_0": 34, "Q4_K": 144 / 8, "Q6_K": 210 / 8}  # bytes per 32 weights


def tool(env, *names):
    for n in [os.environ.get(env)] + list(names):
        if n and shutil.which(n):
            return shutil.which(n)
    sys.exit(f"run_mca: none of {names} found (set {env})")


def compile_src(compiler, flags, src, s):
    """Assembly of src at s (kept until src is newer: headers need --clean), as lines."""
    if not s.exists() or s.stat().st_mtime < src.stat().st_mtime:
        s.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([compiler, *flags, "-S", str(src), "-o", str(s)], check=True)
    return s.read_text().splitlines()


def functions(lines, cxxfilt):
    """demangled name -> the function's lines (label to .Lfunc_end)."""
    # C++ (_Z...) and C symbols; local labels (.L...) start with a dot.
    starts = [(i, m.group(1)) for i, ln in enumerate(lines) if (m := re.match(r"^([A-Za-z_][\w.$]*):", ln))]
    names = subprocess.run([cxxfilt], input="\n".join(n for _, n in starts), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    out = {}
    for (i, _), name in zip(starts, names):
        j = i + 1
        while j < len(lines) and not lines[j].startswith(".Lfunc_end"):
            j += 1
        out[name] = lines[i:j]
    return out


LABEL = re.compile(r"^(\.LBB\w+):|^\s*(?://|#) (%bb\.\d+):")
HEADER = re.compile(r"This (?:Inner )?Loop Header: Depth=(\d+)")
MEMBER = re.compile(r"in Loop: Header=(BB\w+) Depth=(\d+)")
PARENT = re.compile(r"Parent Loop (BB\w+) Depth=(\d+)")


def strip(ln, comment):
    """An instruction line without its comment; '' for labels, directives, comments.
    comment: "//" for AArch64 (where '#' starts an immediate), "#" for x86."""
    code = ln.split(comment, 1)[0].rstrip()
    return "" if not code.strip() or code.strip().startswith(".") or code.endswith(":") else code


def loop_bodies(fn, trips, comment):
    """{header: flattened instruction list} of the loops with exactly len(trips) levels of loops
    inside. clang annotates every basic block with its innermost loop (header, depth) and every
    header with its parents. A child loop is written out trips[level] times where it sits in the
    parent's body (its trip count is a compile-time constant in every kernel measured), so the
    whole per-block work is one straight-line region for llvm-mca, as if the child were unrolled."""
    blocks, parent, parents = [], {}, []  # blocks: [loop header or None, depth, instructions]
    for ln in fn:
        if (m := LABEL.match(ln)):
            name = m.group(1)[2:] if m.group(1) else None  # ".LBB3_4" -> "BB3_4"
            blocks.append([None, 0, []])
            parents = []
        elif not blocks:
            continue
        blk = blocks[-1]
        if (h := HEADER.search(ln)):
            blk[0], blk[1] = name, int(h.group(1))
            for p, d in parents:
                if d == blk[1] - 1:
                    parent[name] = p
        elif (mm := MEMBER.search(ln)):
            blk[0], blk[1] = mm.group(1), int(mm.group(2))
        elif (pp := PARENT.search(ln)):  # comes before the header line of the same block
            parents.append((pp.group(1), int(pp.group(2))))
        if not m and (code := strip(ln, comment)):
            blk[2].append(code)

    def ancestors(h):
        while h in parent:
            h = parent[h]
            yield h

    headers = {b[0]: b[1] for b in blocks if b[0]}
    height = {h: 0 for h in headers}
    for h in headers:
        for i, a in enumerate(ancestors(h)):
            height[a] = max(height[a], i + 1)

    def flatten(h, top):  # top: depth of the loop being measured (trips[0] is its child level)
        out, done = [], set()
        for owner, depth, code in blocks:
            if owner == h:
                out += code
            elif owner and h in ancestors(owner):
                child = owner
                while parent.get(child) != h:
                    child = parent[child]
                if child not in done:
                    done.add(child)
                    out += flatten(child, top) * trips[headers[child] - top - 1]
        return out

    return {h: flatten(h, headers[h]) for h in headers if height[h] == len(trips)}


KEY_OPS = re.compile(r"^\s*(fmla|sdot|smmla|smull2?|smlal2?|vfmadd\d+ps|vpdpbusd|vpmaddubsw)\b")

LOAD = re.compile(r"^\s*ld\w*\s")  # ldr, ldur, ldp, ld1, ld1r, ...


def mca(llvm_mca, triple, cpu, attrs, asm_file, report):
    r = subprocess.run([llvm_mca, f"-mtriple={triple}", f"-mcpu={cpu}", f"-mattr={attrs}", "-iterations=500",
                        str(asm_file)], capture_output=True, text=True)
    report.write_text(r.stdout + r.stderr)
    if r.returncode != 0 or "not a recognized processor" in r.stderr:
        return None
    total = int(re.search(r"Total Cycles:\s+(\d+)", r.stdout).group(1))
    iters = int(re.search(r"Iterations:\s+(\d+)", r.stdout).group(1))
    return total / iters


class Mca:
    """Compiles translation units (once each), cuts a function's loop out and runs llvm-mca on
    it. source() says where a TU is and how it is compiled: src/kernels here; run_mca_llamacpp.py
    overrides it for llama.cpp's files."""

    def __init__(self, out):
        self.out = out
        for d in ("loops", "reports"):
            (out / d).mkdir(parents=True, exist_ok=True)
        self.clang = tool("CLANG", "clang++", "clang++-19", "clang++-14")
        self.llvm_mca = tool("LLVM_MCA", "llvm-mca-19", "llvm-mca-18", "llvm-mca-17", "llvm-mca")
        self.cxxfilt = tool("CXXFILT", "llvm-cxxfilt", "llvm-cxxfilt-19", "c++filt")
        ver = subprocess.run([self.llvm_mca, "--version"], capture_output=True, text=True).stdout
        self.ver = re.search(r"LLVM version ([\d.]+)", ver).group(1)
        self.cver = re.search(r"version ([\d.]+)", subprocess.run([self.clang, "--version"], capture_output=True,
                                                                    text=True).stdout).group(1)
        self.asm, self.notes = {}, []

    def source(self, isa, tu):  # -> (compiler, flags, source file)
        return self.clang, [*ISA[isa], *COMMON, *TU_FLAGS.get(tu, [])], ROOT / "src" / "kernels" / tu

    def measure(self, loop, tag, cpus, triple, attrs):
        """{cpu: (cycles per iteration, cycles per unit) or None} of the loop's largest match."""
        isa, tu, func, units, *rest = loop
        trips = rest[0] if rest else ()
        need = rest[1] if len(rest) > 1 else None  # an op the loop must have (not a scalar tail loop)
        key, cmt = (isa, tu), "#" if isa.startswith("avx") else "//"
        if key not in self.asm:
            compiler, flags, src = self.source(isa, tu)
            s = self.out / "asm" / f"{Path(tu).stem}.{isa}.s"
            self.asm[key] = functions(compile_src(compiler, flags, src, s), self.cxxfilt)
        fns = self.asm[key]
        for pat in (func,) if isinstance(func, str) else func:  # the first that has the loop
            loops = [lp for n in fns if pat in n for lp in loop_bodies(fns[n], trips, cmt).items()
                     if not need or any(re.match(rf"^\s*{need}\b", x) for x in lp[1])]
            if loops:
                func = pat
                break
        if not loops:  # the compiler unrolled differently: say what there is
            have = {n[:60]: {t: len(b) for t in [(), (2,), (2, 2)] for b in loop_bodies(fns[n], t, cmt).values()}
                    for pat in ((func,) if isinstance(func, str) else func) for n in fns if pat in n}
            sys.exit(f"run_mca: no loop with {len(trips)} loop levels inside for {func!r} in {tu} ({isa}): {have}")
        label, insns = max(loops, key=lambda lp: len(lp[1]))
        f = self.out / "loops" / f"{tag}.s"
        f.write_text("\n".join(insns) + "\n")
        ops = [m.group(1) for x in insns if (m := KEY_OPS.match(x))]  # for checking units by eye
        ops = ", ".join(f"{ops.count(o)} {o}" for o in sorted(set(ops)))
        n_ld = sum(1 for x in insns if LOAD.match(x))  # AArch64 only (x86 loads are operands)
        loads = "" if cmt == "#" else f"; {n_ld} loads"
        self.notes.append(f"{tag}: {tu} [{isa}] {func}, loop {label} (trips {trips}): {len(insns)} instructions, "
                          f"{units} units/iteration; {ops}{loads}")
        res = {}
        for cpu in cpus:
            cyc = mca(self.llvm_mca, triple, cpu, attrs, f, self.out / "reports" / f"{tag}.{cpu}.txt")
            res[cpu] = None if cyc is None else (cyc, cyc / units)
        return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "build-mca"), help="work folder (asm, loops, reports)")
    ap.add_argument("--clean", action="store_true", help="recompile every TU (after header changes)")
    ap.add_argument("--rows", default="", help="only the rows whose label matches this regular expression")
    args = ap.parse_args()
    out = Path(args.out)
    if args.clean and out.exists():
        shutil.rmtree(out)
    m = Mca(out)
    ver, cver, notes, measure = m.ver, m.cver, m.notes, m.measure
    results = {}

    for label, arm, x2, x5 in ROWS:
        if not re.search(args.rows, label):
            continue
        tag = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").lower()
        row = {}
        if arm:
            cpus = I8MM_CPUS if arm[0] == "i8mm" else ARM_CPUS + (I8MM_CPUS if "GEMM" in label else [])
            row.update(measure(arm, tag + ".arm", cpus, "aarch64", "+dotprod,+i8mm,+fullfp16"))
        for loop, kind in ((x2, "avx2"), (x5 or (x2 and ("avx2",) + x2[1:]), "avx512")):
            if loop:
                cpu = X86_CPUS[kind]
                r = measure(loop, f"{tag}.{kind}", [cpu, "icelake-server"] if kind == "avx512" else [cpu], "x86_64",
                            "")
                row[kind] = r.get(cpu) or r.get("icelake-server")
                row[kind + "_inherited"] = x5 is None and kind == "avx512"
        results[label] = row

    def cell(v):
        return "—" if not v else f"{v[1]:.2f}"

    cols = ARM_CPUS + I8MM_CPUS
    print(f"llvm-mca {ver}, clang {cver}; cycles per 32-weight block (GEMM: per block and token)\n")
    print("| loop | " + " | ".join(cols) + " | znver3 (AVX2) | znver4 (AVX-512) |")
    print("|---" * (len(cols) + 3) + "|")
    for label, row in results.items():
        x5 = cell(row.get("avx512")) + (" (AVX2 code)" if row.get("avx512_inherited") else "")
        print(f"| {label} | " + " | ".join(cell(row.get(c)) for c in cols) + f" | {cell(row.get('avx2'))} | {x5} |")
    # What decode needs from memory: every weight byte once per token. GB/s one core can consume at
    # the modelled speed; above the phone's DRAM bandwidth (15-30 GB/s, shared by all cores) the
    # loop is memory-bound, far below it compute-bound.
    print("\nWeight bytes one core consumes per second at the modelled speed (decode rows), GB/s:\n")
    print("| loop | B / 32 w | A55 @ 1.8 GHz | A76 (N1 model) @ 2.4 GHz | Zen 3 @ 4.0 GHz |")
    print("|---|---|---|---|---|")
    for label, row in results.items():
        ty = re.search(r"Q\d_[01K]", label).group(0)
        if label.startswith("decode"):
            gbs = [f"{BYTES[ty] * ghz / row[c][1]:.1f}" if row.get(c) else "—"
                   for c, ghz in (("cortex-a55", 1.8), ("neoverse-n1", 2.4), ("avx2", 4.0))]
            print(f"| {label} | {BYTES[ty]:g} | " + " | ".join(gbs) + " |")
    print("\nLoops (files under " + str(out / "loops") + "):")
    for n in notes:
        print("  " + n)


if __name__ == "__main__":
    main()
