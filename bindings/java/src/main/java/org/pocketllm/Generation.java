package org.pocketllm;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/** A generation started on a session's worker: cancel it, wait for it, or chain on its future. */
public final class Generation {
  private final Session session;
  final long id;
  private final CompletableFuture<Completion> result = new CompletableFuture<>();
  volatile boolean started;  // the worker has taken it up

  Generation(Session session, long id) {
    this.session = session;
    this.id = id;
  }

  /**
   * Stops it, from any thread, during the prompt's prefill as during decoding, and returns once
   * it has ended (a step at most; the listener has had its onDone): isDone() is then true and the
   * completion says CANCELLED. From inside its own listener it returns at once and the
   * generation ends after that callback. One still waiting for its turn (behind another of the
   * session's generations) returns at once too: when its turn comes it ends, CANCELLED, without
   * running. A no-op once it has ended.
   */
  public void cancel() {
    session.cancel(id);
    if (started && !session.onWorker()) {
      try {
        result.join();
      } catch (RuntimeException e) {  // ended with an error: await() reports it
      }
    }
  }

  /**
   * Waits for the end and returns the completion, or throws the engine's PocketLLMException (or
   * what the listener threw). An interrupt of the waiting thread cancels the generation and
   * throws PocketLLMException.Cancelled with the thread's interrupt flag set again.
   */
  public @NonNull Completion await() {
    try {
      return result.get();
    } catch (InterruptedException e) {
      cancel();
      Thread.currentThread().interrupt();
      throw new PocketLLMException.Cancelled("interrupted while waiting for the generation");
    } catch (ExecutionException e) {
      throw unwrap(e.getCause());
    }
  }

  public boolean isDone() {
    return result.isDone();
  }

  /** Completes when the generation ends (after the listener's onDone / onError returned). */
  public @NonNull CompletableFuture<Completion> future() {
    return result.copy();
  }

  void succeed(Completion c, StreamListener listener) {
    try {
      listener.onDone(c);
    } catch (Throwable t) {
      Workers.uncaught(t);
    }
    result.complete(c);
  }

  void fail(Throwable error, StreamListener listener) {
    try {
      listener.onError(error);
    } catch (Throwable t) {
      Workers.uncaught(t);
    }
    result.completeExceptionally(error);
  }

  static RuntimeException unwrap(Throwable cause) {
    if (cause instanceof RuntimeException) return (RuntimeException) cause;
    if (cause instanceof Error) throw (Error) cause;
    return new PocketLLMException.Internal(String.valueOf(cause));
  }
}
