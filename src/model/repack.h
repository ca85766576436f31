// Load-time weight repacking: matrices whose type has panel kernels on this CPU (Q4_0, Q4_1,
// Q8_0, and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS for int16: TypeKernels::gemm_i16_panels for int16 activations on AVX2 and AVX-512, vec_dot_panels
// and gemm_q8_panels for int8 on AVX-512 VNNI and ARM dotprod / i8mm) are copied once into 16-row panels (quant/panel.h) and the file
// pages they came from are released, so the weights are held once, in the layout those kernels
// stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_buffer.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace pllm {

// Whether m would be repacked with table kt in this mode (RepackMode::int16: only types with
// gemm_i16_panels; all: types with vec_dot_panels).
bool repackable(const Matrix& m, const KernelTable& kt, RepackMode mode);

struct RepackResult {
  int tensors = 0;    // distinct tensors repacked (a tied output counts once)
  size_t bytes = 0;   // bytes now held in panels
  int copied = 0;     // matrices copied in the file's layout (no panel kernel for their type)
  size_t copied_bytes = 0;
};

// Repacks every repackable matrix of w into one buffer appended to store (with a copy of the
// other matrices a decode step streams, in the file's layout, and of the norm and bias
// vectors), points the views (all views of one tensor) at it and releases the source pages of
// f's mapping. Nothing is copied when no matrix is repackable.
RepackResult repack_weights(ModelWeights& w, const KernelTable& kt, const GgufFile& f,
                            std::vector<AlignedBuffer<uint8_t>>& store, RepackMode mode);

// The same for any set of matrix views into f (every view of a tensor listed, e.g. a tied
// output beside the embedding) and the 1-D weights that go with them (whole tensors of f;
// others are left in place): what repack_weights does for a text model and the vision loader
// for an encoder. Views whose data is not in f's mapping (decoded copies) are left alone.
RepackResult repack_matrices(std::span<Matrix* const> matrices, std::span<const float** const> vectors,
                             const KernelTable& kt, const GgufFile& f, std::vector<AlignedBuffer<uint8_t>>& store,
                             RepackMode mode);

}  // namespace pllm
