// Driver of the tiled int8 prefill GEMM (TypeKernels::gemm_q8 / gemm_q8_panels), written once
// for every ISA whose kernel repacks weight rows into panels (x86/gemm_avx2.cpp,
// x86/gemm_avx512.cpp, arm/gemm_dotprod.cpp; read gemm_avx512.cpp's header for the scheme).
// ODR: templates over the ISA's types only (see fused_dot.h).
//
// Loops: the per-(token, block) activation terms are computed once per call into
// gemm_scratch; row groups of kPanels panels of kPanel rows x K chunks of kKb blocks are
// packed once (on the stack); then each panel runs against tiles of up to kTile tokens of
// super-tiles of kSuper tokens. Later K chunks accumulate into out (the first one stores).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/internal.h"  // gemm_scratch
#include "quant/panel.h"         // kPanelRows

namespace pllm::kern::drivers {

// Per-token, per-block activation terms: element (t, kb) at [t * ld + kb]. The micro-kernel
// gets a view offset to its super-tile's first token and the K chunk's first block.
struct ActPrep {
  float* d;       // activation scale
  float* s;       // Q8_1 s (types with a weight min only)
  int32_t* corr;  // -offset * sum(a) (types whose packed quants carry an unsigned offset)
  int64_t ld;
};

// Calls G::micro<T, NX> for the run-time token count nx (1 <= nx <= G::kTile): the
// micro-kernels take it at compile time so their per-token accumulators stay in registers.
template <class G, class T, int NX = 1>
inline void micro_nx(int nx, const typename G::Panel& P, int kbn, const uint8_t* const* arow, const ActPrep& ap,
                     int t0, float* out, int64_t os, typename G::Mask mask, bool acc) {
  if constexpr (NX < G::kTile) {
    if (nx > NX) return micro_nx<G, T, NX + 1>(nx, P, kbn, arow, ap, t0, out, os, mask, acc);
  }
  G::template micro<T, NX>(P, kbn, arow, ap, t0, out, os, mask, acc);
}

// G (the ISA's GEMM micro-kernel): kPanel, kPanels, kKb, kSuper, kTile; Panel (one packed
// panel); Mask and mask(nr) (the valid rows of a panel, as the micro-kernel wants them);
// pack<T>(w, w_stride, nr, kb0, kbn, Panel&); micro<T, NX>(panel, kbn, arow, ActPrep view,
// t0, out, out_stride, mask, accumulate) for NX tokens; where some T::kOffset != 0,
// sum32(qs) (the sum of a block's 32 activation bytes); where Repacked is used,
// pack_repacked<T>(panel_w, row0, kb0, kbn, Panel&): G's panel is rows row0 .. row0 + kPanel - 1
// of the load-time panel at panel_w (row0 = 0 where kPanel == kPanelRows; the 8-row ARM
// panels take the two halves of a 16-row one).
// T (the weight type): W, A (weight / activation blocks), kMin, kOffset, act_d(a), act_s(a).
// Repacked: w holds load-time 16-row panels (quant/panel.h), n_rows a multiple of kPanel.
template <class G, class T, bool Repacked = false>
void gemm_q8(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t xq_stride, int n_x,
             float* out, int64_t out_stride) {
  constexpr int kPanel = G::kPanel, kPanels = G::kPanels, kKb = G::kKb, kSuper = G::kSuper, kTile = G::kTile;
  static_assert(!Repacked || kPanelRows % kPanel == 0, "G's panels must tile the load-time panels");
  const int nb = static_cast<int>(n / 32);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  typename G::Panel panels[kPanels];
  const int64_t nprep = int64_t(n_x) * nb;
  float* prep = static_cast<float*>(gemm_scratch(size_t(nprep) * 3 * sizeof(float)));
  const ActPrep ap{prep, prep + nprep, reinterpret_cast<int32_t*>(prep + 2 * nprep), nb};
  for (int t = 0; t < n_x; ++t) {
    const typename T::A* a = reinterpret_cast<const typename T::A*>(xb + t * xq_stride);
    for (int kb = 0; kb < nb; ++kb) {
      ap.d[t * nb + kb] = T::act_d(a[kb]);
      if constexpr (T::kMin) ap.s[t * nb + kb] = T::act_s(a[kb]);
      if constexpr (T::kOffset != 0) ap.corr[t * nb + kb] = -T::kOffset * G::sum32(a[kb].qs);
    }
  }
  for (int rg = 0; rg < n_rows; rg += kPanel * kPanels) {
    const int nrg = n_rows - rg < kPanel * kPanels ? n_rows - rg : kPanel * kPanels;
    const int np = (nrg + kPanel - 1) / kPanel;
    for (int kb0 = 0; kb0 < nb; kb0 += kKb) {
      const int kbn = nb - kb0 < kKb ? nb - kb0 : kKb;
      for (int p = 0; p < np; ++p) {
        const int nr = nrg - p * kPanel < kPanel ? nrg - p * kPanel : kPanel;
        const int r = rg + p * kPanel;
        if constexpr (Repacked)
          G::template pack_repacked<T>(wb + size_t(r / kPanelRows) * kPanelRows * w_stride, r % kPanelRows, kb0, kbn,
                                       panels[p]);
        else G::template pack<T>(wb + r * w_stride, w_stride, nr, kb0, kbn, panels[p]);
      }
      for (int x0 = 0; x0 < n_x; x0 += kSuper) {
        const int nxs = n_x - x0 < kSuper ? n_x - x0 : kSuper;
        const uint8_t* arow[kSuper];
        for (int t = 0; t < nxs; ++t) arow[t] = xb + (x0 + t) * xq_stride + kb0 * sizeof(typename T::A);
        const int64_t o = x0 * ap.ld + kb0;
        const ActPrep apx{ap.d + o, ap.s + o, ap.corr + o, ap.ld};
        for (int p = 0; p < np; ++p) {
          const int nr = nrg - p * kPanel < kPanel ? nrg - p * kPanel : kPanel;
          const typename G::Mask mask = G::mask(nr);
          for (int t0 = 0; t0 < nxs; t0 += kTile) {
            const int nx = nxs - t0 < kTile ? nxs - t0 : kTile;
            float* op = out + (x0 + t0) * out_stride + rg + p * kPanel;
            micro_nx<G, T>(nx, panels[p], kbn, arow + t0, apx, t0, op, out_stride, mask, kb0 > 0);
          }
        }
      }
    }
  }
}

// The tiled types' entries: gemm_q8 of Q4_0, Q8_0 and Q4_1 (Q40, Q80, Q41: the ISA's T for
// each) and, where the ISA packs from load-time panels (kPanels), gemm_q8_panels.
template <class G, class Q40, class Q80, class Q41, bool kPanels>
void set_gemm_q8(KernelTable& t) {
  auto at = [&t](TensorType type) -> TypeKernels& { return t.types[static_cast<uint32_t>(type) & 31]; };
  at(TensorType::Q4_0).gemm_q8 = gemm_q8<G, Q40>;
  at(TensorType::Q8_0).gemm_q8 = gemm_q8<G, Q80>;
  at(TensorType::Q4_1).gemm_q8 = gemm_q8<G, Q41>;
  if constexpr (kPanels) {
    at(TensorType::Q4_0).gemm_q8_panels = gemm_q8<G, Q40, true>;
    at(TensorType::Q8_0).gemm_q8_panels = gemm_q8<G, Q80, true>;
    at(TensorType::Q4_1).gemm_q8_panels = gemm_q8<G, Q41, true>;
  }
}

}  // namespace pllm::kern::drivers
