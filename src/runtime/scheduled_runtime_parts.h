// The private parts of ScheduledRuntime that its two source files share.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/scheduled_runtime.h"

namespace pllm {

// A request R is two scheduler requests on its session: 2R prefills the prompt, 2R+1
// generates. Control requests the runtime submits use the top bit.
inline constexpr uint64_t kControlBit = uint64_t(1) << 63;
inline uint64_t prompt_part(uint64_t r) { return 2 * r; }
inline uint64_t gen_part(uint64_t r) { return 2 * r + 1; }

struct ScheduledRuntime::Live {
  uint64_t id = 0;
  int64_t session = 0;
  RuntimeRequest req;
  std::shared_ptr<const RuntimeCallback> on_event;  // shared with the events in delivery
  bool prompt_pending = false;  // its prefill part has not ended
  bool gen_pending = false;     // its generation part has not ended
  int prompted = 0;   // prompt tokens prefilled so far
  int cached = 0;     // prompt tokens restored from the prefix cache at submit (not in req.prompt)
  int generated = 0;
  double submit_ms = 0;
  bool over_bound = false;  // counted past its class's first-token bound
  std::optional<EndReason> reason;  // set when the prompt part ended early: the request's outcome
  Status status = Status::ok;
  std::unique_ptr<Sampler> sampler;  // made at the first generated token
  // A token sampled and streamed whose forward pass was stopped for an interactive request:
  // the next step feeds it again instead of sampling (the client already has it).
  std::optional<int32_t> replay_token;
  // Speculative decoding (req.draft): the drafter, the adaptive guess count and the last
  // verify row (the drawn token, then the guesses) with its logits.
  std::unique_ptr<Drafter> drafter;
  std::optional<DraftLength> draft_length;
  std::vector<int32_t> verify_row, seq_scratch;
  std::vector<float> verify_logits;
  double draft_ms = 0;
  DraftStats draft_stats;
};

struct ScheduledRuntime::Stash {
  std::vector<uint8_t> kv;   // Session::save_prefix of the whole history
  std::vector<float> logits;  // the last row's logits, when the session had them
};

struct ScheduledRuntime::Slot {
  std::unique_ptr<Session> session;
  bool has_logits = false;   // last_logits() belongs to the last token of the history
  bool in_flight = false;    // has a row in the running forward pass (cancel stops it)
  // Its in-flight background row was stopped for an interactive request (set by submit under
  // the lock, read by the stepping thread after the forward pass, outside it).
  std::atomic<bool> preempted{false};
  std::optional<Stash> stash;
};

struct ScheduledRuntime::RowWork {
  PlanRow row;
  Slot* slot = nullptr;
  Live* live = nullptr;
  int32_t token = -1;  // decode rows: the sampled token fed back
  RowResult result;
  bool runs = false;   // takes part in the forward pass
};

// Buffers of one step, kept between steps (only the stepping thread, under step_mu_, uses them).
struct ScheduledRuntime::StepBuffers {
  std::vector<RowWork> work;
  std::vector<SessionStep> steps;
  std::vector<size_t> step_of;
  std::vector<RowResult> results;
  std::vector<float> logits;
};

}  // namespace pllm
