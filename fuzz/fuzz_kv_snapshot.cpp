// KV snapshot files (the prefix cache's files on disk, restore_prefix's argument): parse with
// and without the checksum (without it the fuzzer gets past the checksum to everything
// behind it), then do what Session::restore_prefix does with a snapshot that parses: check
// the tokens, restore it into a cache of the matching type and attend over what it restored.
// The caches are small and fixed (kv_fixture below); a snapshot taken from them is the seed.
//
// Check beyond "no crash": a restored cache exports exactly the bytes it was restored from.
//
// PLLM_FUZZ_WRITE_SEEDS=DIR fuzz_kv_snapshot writes one valid snapshot per KV type (made by
// make_kv_snapshot from stored positions, the real path) into DIR and exits:
// fuzz/make_corpus.py runs it for fuzz/corpus/fuzz_kv_snapshot/.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/kv_snapshot.h"

using namespace pllm;

namespace {

constexpr uint64_t kModelId = 0x5eed5eed5eedull;
constexpr int kCtx = 96, kBatch = 32, kHeadDim = 64, kVocab = 1000;
constexpr KvType kTypes[] = {KvType::f32, KvType::f16, KvType::q8, KvType::q4};

ModelConfig fixture_config() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = kHeadDim;
  c.n_embd = 2 * kHeadDim;
  return c;
}

std::unique_ptr<KvCache> make_cache(KvType t) {
  KvOptions o;
  o.type = t;
  if (!KvCache::validate(fixture_config(), o).ok()) std::abort();
  return std::make_unique<KvCache>(fixture_config(), o, kCtx, kBatch, std::vector<int>{});
}

std::unique_ptr<KvCache> g_cache[4];
float g_inv_freq[kHeadDim / 2];

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_kv_snapshot: %s\n", what);
  std::abort();
}

// Snapshots of n stored positions of a fresh cache of each type: the seed corpus.
void write_seeds(const char* dir) {
  const int lengths[] = {3, 3, 3, 35};  // q4: a quantised group of 32 plus three f16 rows
  for (size_t i = 0; i < 4; ++i) {
    auto kv = make_cache(kTypes[i]);
    const int n = lengths[i];
    if (!kv->begin_batch(0, n).ok()) std::abort();
    std::vector<float> k(size_t(kv->kv_dim())), v(k.size());
    std::vector<int32_t> tokens;
    for (int pos = 0; pos < n; ++pos) {
      tokens.push_back(100 + pos * 7);
      for (int l = 0; l < kv->n_layer(); ++l) {
        for (size_t d = 0; d < k.size(); ++d) {
          k[d] = std::sin(0.1f * float(pos * 64 + int(d) + l));
          v[d] = std::cos(0.07f * float(pos * 64 + int(d) - l));
        }
        kv->store(l, pos, k.data(), v.data());
      }
    }
    auto snap = make_kv_snapshot(*kv, kModelId, tokens);
    if (!snap.ok()) std::abort();
    const std::string path = std::string(dir) + "/" + kv_type_name(kTypes[i]) + ".kvsnap";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(snap->data(), 1, snap->size(), f) != snap->size() || std::fclose(f) != 0) std::abort();
    std::printf("wrote %s (%zu bytes)\n", path.c_str(), snap->size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("PLLM_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  for (size_t i = 0; i < 4; ++i) g_cache[i] = make_cache(kTypes[i]);
  for (int i = 0; i < kHeadDim / 2; ++i) g_inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / kHeadDim);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)parse_kv_snapshot(bytes, true);
  auto view = parse_kv_snapshot(bytes, false);
  if (!view.ok()) return 0;
  const std::vector<int32_t> ids = view->token_ids();
  check(ids.size() == size_t(view->n_pos), "token_ids() size differs from n_pos");
  // Session::restore_prefix's checks before it touches its cache.
  if (view->n_pos >= kCtx) return 0;
  for (const int32_t id : ids)
    if (id < 0 || id >= kVocab) return 0;

  KvCache& kv = *g_cache[size_t(view->type)];
  if (!restore_kv_snapshot(kv, kModelId, *view).ok()) return 0;
  check(kv.end() == view->n_pos, "restored cache holds another number of positions");
  auto n_bytes = kv.prefix_bytes(view->n_pos);
  check(n_bytes.ok() && *n_bytes == view->kv.size(), "restored cache's snapshot size differs");
  if (*n_bytes > 0) {  // (an empty vector's data() may be null: no memcpy/memcmp on it)
    std::vector<uint8_t> back(*n_bytes);
    check(kv.export_prefix(view->n_pos, back.data()).ok(), "restored cache cannot export");
    check(std::memcmp(back.data(), view->kv.data(), back.size()) == 0, "restored cache exports other bytes");
  }

  // The next decode step's attention over the restored positions, every layer.
  if (view->n_pos > 0) {
    std::vector<float> q(kHeadDim, 0.25f);
    const RopeSpec rope{g_inv_freq, kHeadDim, false};
    for (int l = 0; l < kv.n_layer(); ++l) {
      AttnAccum a;
      attn_accum_init(a, kHeadDim);
      kv.attend_part(l, view->n_pos - 1, 0, 1, q.data(), 0.125f, rope, 0, 1, &a);
    }
  }
  return 0;
}
