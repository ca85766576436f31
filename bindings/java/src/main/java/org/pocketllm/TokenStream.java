package org.pocketllm;

import java.util.Objects;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A reply as a {@link Flow.Publisher} of text pieces, for one subscriber. The generation starts
 * on subscribe and never waits for the subscriber (pieces queue up until requested), so a slow
 * or abandoned subscriber cannot hold the session: it ends at maxTokens or on cancel. Signals
 * come on the binding's delivery threads, one at a time, never on the subscriber's own thread.
 * Subscription.cancel() stops the generation (then no more signals); completion() tells how it
 * ended, with the stats.
 */
public final class TokenStream implements Flow.Publisher<String> {
  private final Session session;
  private final int[] prompt;
  private final GenerateOptions options;
  private final AtomicBoolean subscribed = new AtomicBoolean();
  private final CompletableFuture<Completion> completion = new CompletableFuture<>();
  private volatile Generation generation;

  TokenStream(Session session, int[] prompt, GenerateOptions options) {
    this.session = session;
    this.prompt = prompt;
    this.options = options;
  }

  @Override
  public void subscribe(Flow.Subscriber<? super String> subscriber) {
    Objects.requireNonNull(subscriber, "subscriber");
    if (!subscribed.compareAndSet(false, true)) {
      Workers.DELIVERY.execute(() -> {
        subscriber.onSubscribe(new Flow.Subscription() {
          @Override public void request(long n) {}
          @Override public void cancel() {}
        });
        subscriber.onError(new IllegalStateException("a TokenStream takes one subscriber"));
      });
      return;
    }
    Delivery d = new Delivery(subscriber);
    try {
      generation = session.start(prompt, options, d);
    } catch (RuntimeException e) {  // e.g. the session was closed: the Flow way is onError
      d.onError(e);
      return;
    }
    d.drain();  // signals onSubscribe
  }

  /** Completes with the completion (its text and stats) when the generation ends. */
  public @NonNull CompletableFuture<Completion> completion() {
    return completion.copy();
  }

  /** Stops the generation (see Generation.cancel); a no-op before subscribe or after the end. */
  public void cancel() {
    Generation g = generation;
    if (g != null) g.cancel();
  }

  /** The listener of the generation and the subscription of the subscriber, in one. */
  private final class Delivery implements StreamListener, Flow.Subscription {
    private final Flow.Subscriber<? super String> subscriber;
    private final Queue<String> pieces = new ConcurrentLinkedQueue<>();
    private final AtomicLong requested = new AtomicLong();
    private final AtomicInteger wip = new AtomicInteger();  // drain passes owed; one runs at a time
    private volatile boolean finished;
    private volatile Throwable error;
    private volatile boolean cancelled;
    private boolean started;  // onSubscribe signalled (drain thread only)

    Delivery(Flow.Subscriber<? super String> subscriber) {
      this.subscriber = subscriber;
    }

    // ---- from the generation (the session's worker) ----
    @Override
    public void onToken(String piece) {
      pieces.add(piece);
      drain();
    }

    @Override
    public void onDone(Completion c) {
      completion.complete(c);
      finished = true;
      drain();
    }

    @Override
    public void onError(Throwable e) {
      completion.completeExceptionally(e);
      error = e;
      finished = true;
      drain();
    }

    // ---- from the subscriber ----
    @Override
    public void request(long n) {
      if (n <= 0) {  // Reactive Streams rule 3.9
        error = new IllegalArgumentException("request(" + n + "): demand must be positive");
        finished = true;
        cancelGeneration();
      } else {
        requested.getAndUpdate(r -> r + n < 0 ? Long.MAX_VALUE : r + n);
      }
      drain();
    }

    @Override
    public void cancel() {
      cancelled = true;
      cancelGeneration();
    }

    private void cancelGeneration() {
      Generation g = generation;
      if (g != null) g.cancel();
    }

    void drain() {
      if (wip.getAndIncrement() == 0) Workers.DELIVERY.execute(this::drainLoop);
    }

    private void drainLoop() {
      int missed = 1;
      while (true) {
        if (!started) {
          started = true;
          subscriber.onSubscribe(this);
        }
        long r = requested.get();
        long sent = 0;
        while (sent != r && !cancelled) {
          if (error instanceof IllegalArgumentException) break;  // a bad request: straight to onError
          String piece = pieces.poll();
          if (piece == null) break;
          subscriber.onNext(piece);
          sent++;
        }
        if (sent != 0 && r != Long.MAX_VALUE) requested.addAndGet(-sent);
        if (cancelled) return;
        if (finished && (pieces.isEmpty() || error != null)) {
          cancelled = true;  // terminal: nothing after this
          if (error != null) {
            subscriber.onError(error);
          } else {
            subscriber.onComplete();
          }
          return;
        }
        missed = wip.addAndGet(-missed);
        if (missed == 0) return;
      }
    }
  }
}
