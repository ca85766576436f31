#include "backends/vulkan/vk_matmul.h"

#include <algorithm>
#include <string>
#include <vector>

#include "vk_shaders.h"

namespace pllm::vk {
namespace {

// Geometry (matmul_common.glsl): 64 invocations per workgroup, `lanes` of them per output
// row; activation tiles of kTile rows for prefill, 1 for decode (no idle tile rows).
constexpr uint32_t kGroupSize = 64;
constexpr uint32_t kGpuLanes = 16;
constexpr uint32_t kTile = 8;
constexpr uint32_t kMaxGroups = 65535;  // the guaranteed maxComputeWorkGroupCount per dimension

struct TypeEntry {
  TensorType type;
  uint32_t block_elems, block_bytes;
  int act_mode;  // matmul_quant_act mode for the int8 path; -1: float weights (no int8 path)
  const char* float_name;
  const char* int_name;
};

// Activation formats as the CPU picks them (kernels/generic/scalar.cpp): Q8_0 for Q4_0, Q5_0
// and Q8_0 (and IQ4_NL); Q8_1 for Q4_1 and Q5_1; Q8_K (256-element blocks) for the K types and
// IQ4_XS. Q2_K has no shader (its min changes every 16 elements, the int8 path's code sums are
// per 32): a model holding it runs on the CPU (VulkanBackend says why).
constexpr TypeEntry kTypes[] = {
    {TensorType::F32, 1, 4, -1, "matmul_f32", ""},
    {TensorType::F16, 1, 2, -1, "matmul_f16", ""},
    {TensorType::Q4_0, 32, 18, 0, "matmul_q4_0", "matmul_q4_0_int8"},
    {TensorType::Q4_1, 32, 20, 1, "matmul_q4_1", "matmul_q4_1_int8"},
    {TensorType::Q5_0, 32, 22, 0, "matmul_q5_0", "matmul_q5_0_int8"},
    {TensorType::Q5_1, 32, 24, 1, "matmul_q5_1", "matmul_q5_1_int8"},
    {TensorType::Q8_0, 32, 34, 0, "matmul_q8_0", "matmul_q8_0_int8"},
    {TensorType::Q4_K, 256, 144, 2, "matmul_q4_k", "matmul_q4_k_int8"},
    {TensorType::Q5_K, 256, 176, 2, "matmul_q5_k", "matmul_q5_k_int8"},
    {TensorType::Q6_K, 256, 210, 2, "matmul_q6_k", "matmul_q6_k_int8"},
    {TensorType::Q3_K, 256, 110, 2, "matmul_q3_k", "matmul_q3_k_int8"},
    {TensorType::IQ4_NL, 32, 18, 0, "matmul_iq4_nl", "matmul_iq4_nl_int8"},
    {TensorType::IQ4_XS, 256, 136, 2, "matmul_iq4_xs", "matmul_iq4_xs_int8"},
};
constexpr int kNumTypes = int(sizeof(kTypes) / sizeof(kTypes[0]));

int type_index(TensorType t) {
  for (int i = 0; i < kNumTypes; ++i)
    if (kTypes[i].type == t) return i;
  return -1;
}

// matmul_common.glsl's push constants.
struct MatmulPush {
  uint32_t cols, row_bytes, w_skip, nrows, row0, y_stride, n, scale_base, sum_base, qblk;
};
// matmul_quant_act.comp's push constants.
struct QuantPush {
  uint32_t cols, n, mode, scale_base, sum_base;
};

}  // namespace

bool matmul_supported(TensorType t) { return type_index(t) >= 0; }

struct MatmulKernels::Impl {
  Context* ctx = nullptr;
  // [type][0]: one activation row (decode), [type][1]: kTile rows.
  std::unique_ptr<Kernel> fl[kNumTypes][2], in[kNumTypes][2];
  uint32_t lanes = kGpuLanes;  // invocations per output row
  std::unique_ptr<Kernel> quant;
  uint64_t max_binding = 0;
  // The int8 path's scratch (codes, scales, sums), grown on demand. A recording may still
  // use a smaller one that was replaced, so replaced buffers are kept until this object
  // dies (growth doubles, so there are few).
  Buffer scratch;
  std::vector<Buffer> retired;

  Result<View> scratch_for(size_t bytes) {
    if (scratch.size() < bytes) {
      PLLM_ASSIGN(Buffer b, ctx->buffer(std::max(bytes, scratch.size() * 2), Mem::device));
      if (scratch.handle()) retired.push_back(std::move(scratch));
      scratch = std::move(b);
    }
    return view(scratch, 0, bytes);
  }
};

MatmulKernels::~MatmulKernels() = default;

Result<std::unique_ptr<MatmulKernels>> MatmulKernels::create(Context& ctx) {
  std::unique_ptr<MatmulKernels> k(new MatmulKernels());
  k->impl_ = std::make_unique<Impl>();
  Impl& m = *k->impl_;
  m.ctx = &ctx;
  m.max_binding = ctx.info().max_storage_range;
  // CPU devices (lavapipe) get one invocation per output row and the activations shared by
  // subgroupBroadcast (matmul_common.glsl): their SIMD lanes are invocations and every
  // non-uniform load is a loop over lanes. The broadcast reads 8 lanes' worth of a unit.
  const DeviceInfo& di = ctx.info();
  const bool cpu = !ctx.gpu_layout() && di.type == "cpu" && di.subgroup_ballot && di.subgroup_size >= 8 && di.subgroup_size <= 64;
  m.lanes = cpu ? 1 : kGpuLanes;
  std::span<const uint32_t> fl = ctx.use_f16() ? std::span<const uint32_t>(spv::k_matmul_float_f16)
                                               : std::span<const uint32_t>(spv::k_matmul_float);
  std::span<const uint32_t> in = ctx.use_int_dot() ? std::span<const uint32_t>(spv::k_matmul_int_dot)
                                                   : std::span<const uint32_t>(spv::k_matmul_int);
  if (cpu) {
    fl = spv::k_matmul_float_cpu;
    in = spv::k_matmul_int_cpu;
  }
  for (int i = 0; i < kNumTypes; ++i) {
    const TypeEntry& e = kTypes[i];
    for (int v = 0; v < 2; ++v) {
      // Specialisation constants: the weight type (its ggml id), lanes per row, tile rows.
      const std::initializer_list<uint32_t> spec = {uint32_t(e.type), m.lanes, v ? kTile : 1u};
      PLLM_ASSIGN(m.fl[i][v], Kernel::create(ctx, e.float_name, fl, 3, sizeof(MatmulPush), spec));
      if (e.act_mode >= 0) {
        PLLM_ASSIGN(m.in[i][v], Kernel::create(ctx, e.int_name, in, 3, sizeof(MatmulPush), spec));
      }
    }
  }
  PLLM_ASSIGN(m.quant, Kernel::create(ctx, "matmul_quant_act", spv::k_matmul_quant_act, 2, sizeof(QuantPush)));
  return k;
}

void MatmulKernels::set_max_binding_bytes(uint64_t bytes) { impl_->max_binding = bytes; }

Result<void> MatmulKernels::record(Recorder& rec, const DevMatrix& W, View X, View Y, int n, bool int8) const {
  Impl& m = *impl_;
  const int ti = type_index(W.type);
  if (ti < 0)
    return make_error(Status::unsupported,
                      "Vulkan matmul: no shader for tensor type " + std::to_string(uint32_t(W.type)));
  const TypeEntry& e = kTypes[ti];
  if (n < 1 || W.rows < 1 || W.cols < 1 || W.cols % e.block_elems != 0 ||
      W.row_bytes != size_t(W.cols / e.block_elems) * e.block_bytes || W.data.offset % 4 != 0)
    return make_error(Status::invalid_argument, "Vulkan matmul: bad shape");
  const uint64_t cols = uint64_t(W.cols), rows = uint64_t(W.rows);
  if (X.range < uint64_t(n) * cols * 4 || Y.range < uint64_t(n) * rows * 4 ||
      W.data.range < rows * W.row_bytes)
    return make_error(Status::invalid_argument, "Vulkan matmul: a buffer is smaller than the shapes say");
  // Indices in the shaders are 32-bit.
  if (uint64_t(n) * std::max(cols, rows) >= (uint64_t(1) << 32) || (n + kTile - 1) / kTile > kMaxGroups)
    return make_error(Status::unsupported, "Vulkan matmul: too many activation rows for one call");

  const bool use_int = int8 && e.act_mode >= 0;
  MatmulPush push{uint32_t(cols), uint32_t(W.row_bytes), 0, 0, 0, uint32_t(rows), uint32_t(n), 0, 0, 32};
  View act = X;
  if (use_int) {
    // Pre-pass: int8 codes, scales and code sums into the scratch (layout: matmul_int.glsl).
    const uint64_t qblk = e.act_mode == 2 ? 256 : 32;
    const uint64_t code_words = uint64_t(n) * cols / 4, scales = uint64_t(n) * cols / qblk;
    const uint64_t words = code_words + scales + uint64_t(n) * cols / 32;
    PLLM_ASSIGN(act, m.scratch_for(size_t(words * 4)));
    push.scale_base = uint32_t(code_words);
    push.sum_base = uint32_t(code_words + scales);
    push.qblk = uint32_t(qblk);
    const QuantPush qp{uint32_t(cols), uint32_t(n), uint32_t(e.act_mode), push.scale_base, push.sum_base};
    if ((scales + 63) / 64 > kMaxGroups)
      return make_error(Status::unsupported, "Vulkan matmul: too many activations for one call");
    rec.dispatch(*m.quant, {X, act}, &qp, uint32_t((scales + 63) / 64));
  }
  const int v = n > 1 ? 1 : 0;
  const uint32_t tile = v ? kTile : 1, rows_per_group = kGroupSize / m.lanes;
  const Kernel& k = use_int ? *m.in[ti][v] : *m.fl[ti][v];

  // Row ranges: each binding starts at the storage alignment at or below its first row (the
  // shader skips w_skip bytes) and spans at most max_binding bytes.
  const uint64_t align = std::max<uint64_t>(4, m.ctx->info().storage_align);
  const uint64_t limit = std::min<uint64_t>(m.max_binding, m.ctx->info().max_storage_range);
  const uint64_t slack = align - 1 + 3;  // alignment skip + rounding up to whole words
  if (limit <= slack || (limit - slack) / W.row_bytes < 1)
    return make_error(Status::unsupported, "Vulkan matmul: one weight row is larger than a binding may be");
  const uint64_t max_rows = std::min<uint64_t>((limit - slack) / W.row_bytes, uint64_t(kMaxGroups) * rows_per_group);
  for (uint64_t r0 = 0; r0 < rows; r0 += max_rows) {
    const uint64_t nr = std::min(max_rows, rows - r0);
    const uint64_t first = W.data.offset + r0 * W.row_bytes;
    const uint64_t start = first / align * align;
    // Whole words: the shaders read weights as a uint array, so a matrix ending inside a word
    // (Q4_0, Q5_0, Q8_0, Q6_K rows are 2 mod 4 bytes) needs that word bound, or its last
    // fields read as out of bounds (zeros on robust drivers). The buffer must therefore hold
    // the matrix rounded up to 4 bytes; matrices at 16-byte-aligned offsets with padded ends do.
    const uint64_t range = ((first - start) + nr * W.row_bytes + 3) & ~uint64_t(3);
    push.w_skip = uint32_t(first - start);
    push.nrows = uint32_t(nr);
    push.row0 = uint32_t(r0);
    // Ranges write disjoint columns of Y: one barrier after the last is enough.
    rec.dispatch(k, {View{W.data.buf, start, range}, act, Y}, &push,
                 uint32_t((nr + rows_per_group - 1) / rows_per_group), uint32_t((n + tile - 1) / tile), 1,
                 r0 + nr >= rows);
  }
  return {};
}

}  // namespace pllm::vk
