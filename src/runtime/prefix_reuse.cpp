#include "runtime/prefix_reuse.h"

#include "runtime/prefix_cache.h"
#include "runtime/session.h"

namespace pllm {

size_t keep_common_prefix(Session& s, std::span<const int32_t> tokens, size_t max) {
  const auto& hist = s.history();
  size_t common = 0;
  while (common < hist.size() && common < max && common < tokens.size() && hist[common] == tokens[common]) ++common;
  s.truncate(common);
  return s.history().size();
}

size_t restore_cached_prefix(Session& s, PrefixCache& pc, std::span<const int32_t> tokens, size_t held, size_t max) {
  if (max <= held || !s.snapshots_supported()) return 0;
  auto hit = pc.lookup(s.kv_cache().type(), tokens, held, max, s.compute_tag());
  if (!hit.snapshot) return 0;
  if (auto r = s.restore_prefix(*hit.snapshot, /*verified=*/true); !r.ok()) {
    pc.drop(hit.key, r.error().message);
    return 0;
  }
  return hit.n_tokens;  // the session now holds exactly these tokens
}

void offer_cached_prefix(Session& s, PrefixCache& pc, size_t n) {
  const size_t nb = n / PrefixCache::kBlock * PrefixCache::kBlock;
  if (nb == 0 || s.history().size() < nb || !s.snapshots_supported()) return;
  const std::span<const int32_t> tokens(s.history().data(), nb);
  const KvType type = s.kv_cache().type();
  if (pc.contains(type, tokens, s.compute_tag())) return;
  if (auto snap = s.save_prefix(nb); snap.ok()) pc.insert(type, tokens, std::move(*snap), s.compute_tag());
}

Result<void> prefill_prefix(Session& s, std::span<const int32_t> tokens) {
  size_t held = keep_common_prefix(s, tokens, tokens.size());
  if (held == tokens.size()) return {};
  PrefixCache* pc = s.snapshots_supported() ? s.prefix_cache() : nullptr;
  size_t restored = 0;
  if (pc) {
    restored = restore_cached_prefix(s, *pc, tokens, held, tokens.size());
    if (restored > 0) held = restored;
  }
  if (held < tokens.size()) PLLM_TRY(s.eval(tokens.subspan(held), nullptr));
  if (pc) {
    offer_cached_prefix(s, *pc, tokens.size());
    pc->count_tokens(restored, tokens.size() - held);
  }
  return {};
}

void prewarm(Session& s, std::vector<int32_t> tokens) {
  s.start_background([t = std::move(tokens)](Session& self) { return prefill_prefix(self, t); });
}

}  // namespace pllm
