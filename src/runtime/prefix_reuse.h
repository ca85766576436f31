// Reusing a prompt's computed beginning: what the session already holds, then what the prefix
// cache (runtime/prefix_cache.h) has, and offering what was computed back to the cache.
// generate(), the prewarm below and the scheduled runtime all go through these.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"

namespace pllm {

class PrefixCache;
class Session;

// Keeps the longest common prefix of the session's history and tokens, at most max tokens,
// and drops the rest of the history; returns how many tokens the session holds now (fewer
// when its cache cannot resume there exactly: Session::truncate).
size_t keep_common_prefix(Session& s, std::span<const int32_t> tokens, size_t max);

// The session holds tokens[0, held): restores the longest cached block-aligned prefix of
// tokens with held < n <= max and returns n, or 0 when there is none (also when the session
// cannot take snapshots, or the entry fails to restore: then the entry is dropped and the
// session is unchanged).
size_t restore_cached_prefix(Session& s, PrefixCache& pc, std::span<const int32_t> tokens, size_t held, size_t max);

// Offers the snapshot of the block-aligned part of the session's first n history tokens (a
// group boundary for q4, so always exportable) unless RAM has it already.
void offer_cached_prefix(Session& s, PrefixCache& pc, size_t n);

// Makes the session hold `tokens` (reusing its history, then the prefix cache, then computing
// the rest; no logits) and offers the result to the prefix cache. Cancelled (Status::cancelled)
// when superseded; what was done stays.
Result<void> prefill_prefix(Session& s, std::span<const int32_t> tokens);

// Prewarm: prefill_prefix on the session's background thread (Session::start_background), so
// that the next generate() whose prompt starts with tokens finds them computed. Supersedes
// background work still running; Session::wait_background() returns its result.
void prewarm(Session& s, std::vector<int32_t> tokens);

}  // namespace pllm
