// Why a generation or a scheduled request ended: one enum for generate() (runtime/generator.h),
// the scheduler and the scheduled runtime. Each surface maps it once: pllm_stop_reason
// (api/pocketllm.cpp), pllm_end_reason (api/runtime_api.cpp), the OpenAI finish_reason
// (server/completion.cpp). The first seven values keep their numbers: traces record them.
#pragma once

namespace pllm {

enum class EndReason {
  done,          // all its tokens processed: the prompt prefilled, max_tokens generated
  eos,           // the model ended its turn (an end-of-generation token)
  cancelled,     // cancelled: a cancel control request, or Session::request_cancel
  reset,         // a reset control request
  interrupted,   // an interrupt control request
  failed,        // its row failed (a status says why; out_of_range: the context is full)
  kv_exhausted,  // its session cannot fit the KV budget even alone
  stop_string,   // a stop string completed (the text ends before it)
  callback,      // the caller's token callback asked to stop
  context_full,  // no room in the context for another token
};

constexpr const char* end_reason_name(EndReason r) {
  switch (r) {
    case EndReason::done: return "done";
    case EndReason::eos: return "eos";
    case EndReason::cancelled: return "cancelled";
    case EndReason::reset: return "reset";
    case EndReason::interrupted: return "interrupted";
    case EndReason::failed: return "failed";
    case EndReason::kv_exhausted: return "kv_exhausted";
    case EndReason::stop_string: return "stop_string";
    case EndReason::callback: return "callback";
    case EndReason::context_full: return "context_full";
  }
  return "?";
}

}  // namespace pllm
