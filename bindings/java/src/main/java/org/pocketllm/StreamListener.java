package org.pocketllm;

/**
 * Receives a streamed generation, on the session's worker thread (never the caller's): the
 * pieces of text in order (each complete UTF-8 characters), then exactly one of onDone or
 * onError. An exception thrown by onToken stops the generation and arrives at onError.
 * Calling {@code cancel()} from inside onToken is allowed.
 */
public interface StreamListener {
  void onToken(@NonNull String piece);

  /** The generation ended (stats().stopReason() tells how; CANCELLED after a cancel). */
  default void onDone(@NonNull Completion completion) {}

  default void onError(@NonNull Throwable error) {}
}
