#!/usr/bin/env python3
"""Decode loops on ARM, ours against llama.cpp's, in cycles per weight byte (issue P14).

The same measurement as run_mca.py (whose Mca class compiles, cuts the loop out by clang's loop
annotations and runs llvm-mca; nothing here re-implements it), applied to llama.cpp's own NEON
files from the vendored copy bench/setup_llamacpp.sh unpacks: ggml-cpu/arch/arm/quants.c (the
row-at-a-time ggml_vec_dot_*) and arch/arm/repack.cpp (the ggml_gemv_* over its load-time
repacked weights, what llama.cpp runs for decode on a dotprod core when the rows fit its
interleave; ggml_repack_get_optimal_repack_type in ggml-cpu/repack.cpp). Both are compiled with
llama.cpp's include paths, Release -O3 and the same -march as our dotprod table. Our rows are
run_mca.py's: the int16 default (baseline NEON on every ARM core) and the dotprod int8 kernels.

Cycles per weight byte = cycles per 32-weight unit / bytes of weights per 32 (Q4_0 18, Q8_0 34,
Q4_K 144/8, Q6_K 210/8). Activation bytes are not counted: one activation row is read by every
weight row and stays in cache. See docs/PERFORMANCE.md, "ours against llama.cpp".
"""
import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_mca  # noqa: E402

LLAMA = run_mca.ROOT / "bench" / ".cache" / "sdist" / "src" / "vendor" / "llama.cpp"
CPUS = ["cortex-a55", "cortex-a76", "neoverse-n1"]
MARCH = {"dotprod": ["--target=aarch64-linux-gnu", "-march=armv8.2-a+dotprod"]}

# (type, kernel label, (isa, file under ggml/src/ggml-cpu, function, 32-weight units per iteration[, trips[, op
# the loop must have]])): vec_dot's main loop takes 2 blocks (its one-block tail loop is left out by
# "sdot"); gemv's one iteration is one block (Q4_0, Q8_0: of 4 rows) or superblock (K: of 8 rows).
# Trips: the constant-trip loop clang left rolled inside, the 4 sub-blocks (Q6_K: clang unrolls
# the 2 halves into two such loops; each keeps `if (sb > 1)` as a branch, counted as taken).
LLAMA_ROWS = [
    ("Q4_0", "llama.cpp ggml_vec_dot_q4_0_q8_0", ("dotprod", "arch/arm/quants.c", "ggml_vec_dot_q4_0_q8_0", 2, (), "sdot")),
    ("Q4_0", "llama.cpp ggml_gemv_q4_0_4x4_q8_0 (repacked)",
     ("dotprod", "arch/arm/repack.cpp", "ggml_gemv_q4_0_4x4_q8_0", 4)),
    ("Q8_0", "llama.cpp ggml_vec_dot_q8_0_q8_0", ("dotprod", "arch/arm/quants.c", "ggml_vec_dot_q8_0_q8_0", 2, (), "sdot")),
    ("Q8_0", "llama.cpp ggml_gemv_q8_0_4x4_q8_0 (repacked)",
     ("dotprod", "arch/arm/repack.cpp", "ggml_gemv_q8_0_4x4_q8_0", 4)),
    ("Q4_K", "llama.cpp ggml_vec_dot_q4_K_q8_K", ("dotprod", "arch/arm/quants.c", "ggml_vec_dot_q4_K_q8_K", 8)),
    ("Q4_K", "llama.cpp ggml_gemv_q4_K_8x4_q8_K (repacked)",
     ("dotprod", "arch/arm/repack.cpp", "ggml_gemv_q4_K_8x4_q8_K", 64, (4,))),
    ("Q6_K", "llama.cpp ggml_vec_dot_q6_K_q8_K", ("dotprod", "arch/arm/quants.c", "ggml_vec_dot_q6_K_q8_K", 8)),
    ("Q6_K", "llama.cpp ggml_gemv_q6_K_8x4_q8_K (repacked)",
     ("dotprod", "arch/arm/repack.cpp", "ggml_gemv_q6_K_8x4_q8_K", 64, (4,))),
]
# Ours: run_mca.py's rows by label.
OUR_ROWS = [(t, f"ours {k}", lab) for t in ("Q4_0", "Q8_0", "Q4_K", "Q6_K")
            for k, lab in (("int16 (default)", f"decode int16 {t} (NEON, every ARM level)"),
                           ("int16 SDOT/UDOT (dotprod, i8mm)", f"decode int16 {t} (SDOT/UDOT: dotprod, i8mm)"),
                           ("int8 dotprod", f"decode int8 {t} (dotprod)"),
                           ("int8 dotprod panels", f"decode int8 {t} panels (SDOT / VNNI)"))]


def busiest(report):
    """'unit pressure/cycles' of the most used unit in an llvm-mca report: what bounds the loop
    when the pressure is close to the cycles (else latency or issue bound it)."""
    t = report.read_text()
    names = dict(re.findall(r"^\[([\d.]+)\]\s+- (\w+)", t, re.M))
    m = re.search(r"Resource pressure per iteration:\n(.*)\n(.*)\n", t)
    if not m:
        return "?"
    cols = re.findall(r"\[([\d.]+)\]", m.group(1))
    vals = [0.0 if v == "-" else float(v) for v in m.group(2).split()]
    k = max(range(len(vals)), key=vals.__getitem__)
    cyc = int(re.search(r"Total Cycles:\s+(\d+)", t).group(1)) / int(re.search(r"Iterations:\s+(\d+)", t).group(1))
    return f"{names[cols[k]]} {vals[k]:.0f}/{cyc:.0f}"


class LlamaMca(run_mca.Mca):
    def __init__(self, out, src):
        super().__init__(out)
        self.src = src

    def source(self, isa, tu):
        g = self.src / "ggml"
        c = tu.endswith(".c")
        compiler = self.clang.replace("clang++", "clang") if c else self.clang
        flags = [*MARCH[isa], "-std=gnu11" if c else "-std=gnu++17", "-O3", "-DNDEBUG",
                 f"-I{g / 'include'}", f"-I{g / 'src'}", f"-I{g / 'src' / 'ggml-cpu'}"]
        return compiler, flags, g / "src" / "ggml-cpu" / tu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(run_mca.ROOT / "build-mca"), help="work folder (as run_mca.py's)")
    ap.add_argument("--llama", default=os.environ.get("LLAMA_CPP_SRC", str(LLAMA)), help="llama.cpp source tree")
    args = ap.parse_args()
    src = Path(args.llama)
    if not (src / "ggml" / "src" / "ggml-cpu" / "arch" / "arm" / "quants.c").exists():
        sys.exit(f"run_mca_llamacpp: no llama.cpp sources at {src} (bench/setup_llamacpp.sh unpacks them)")
    out = Path(args.out)
    ours, theirs = run_mca.Mca(out), LlamaMca(out / "llamacpp", src)
    arm = {lab: a for lab, a, _, _ in run_mca.ROWS}
    attrs = "+dotprod,+i8mm,+fullfp16"
    rows = []
    for ty, name, lab in OUR_ROWS:
        if lab in arm:
            tag = "cmp_ours_" + lab.split("(")[0].strip().replace(" ", "_").lower() + "_" + arm[lab][0]
            rows.append((ty, name, ours.measure(arm[lab], tag, CPUS, "aarch64", attrs), ours.notes[-1], ours, tag))
    for ty, name, loop in LLAMA_ROWS:
        tag = "llamacpp_" + loop[2]
        rows.append((ty, name, theirs.measure(loop, tag, CPUS, "aarch64", attrs), theirs.notes[-1], theirs, tag))
    rows.sort(key=lambda r: ["Q4_0", "Q8_0", "Q4_K", "Q6_K"].index(r[0]))  # stable: ours first per type
    print(f"llvm-mca {ours.ver}, clang {ours.cver}; llama.cpp at {src}\n")
    print("Cycles per weight byte (cycles per 32-weight unit / weight bytes per 32):\n")
    print("| type | loop | " + " | ".join(CPUS) + " |")
    print("|---" * (len(CPUS) + 2) + "|")
    for ty, name, res, *_ in rows:
        cells = [f"{res[c][1] / run_mca.BYTES[ty]:.3f}" if res.get(c) else "—" for c in CPUS]
        print(f"| {ty} | {name} | " + " | ".join(cells) + " |")
    print("\nLoops (instructions, units per iteration, key ops, loads; busiest unit: pressure/cycles per iteration):")
    for _, _, _, note, m, tag in rows:
        units = "; ".join(f"{c}: {busiest(m.out / 'reports' / f'{tag}.{c}.txt')}" for c in ("cortex-a55", "neoverse-n1"))
        print(f"  {note}; {units}")


if __name__ == "__main__":
    main()
