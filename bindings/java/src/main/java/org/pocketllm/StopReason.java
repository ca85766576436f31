package org.pocketllm;

/** Why a generation ended (pllm_stop_reason; a stop through the binding's callback is CANCELLED). */
public enum StopReason {
  /** The model ended its turn. */
  EOG,
  MAX_TOKENS,
  /** A stop string was produced (it is not part of the text). */
  STOP_STRING,
  CANCELLED,
  CONTEXT_FULL;

  static StopReason of(int value) {
    switch (value) {
      case 0: return EOG;
      case 1: return MAX_TOKENS;
      case 2: return STOP_STRING;
      case 5: return CONTEXT_FULL;
      default: return CANCELLED;  // 3 (callback) and 4 (cancelled)
    }
  }
}
