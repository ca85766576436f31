package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Flow;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * cancel() from another thread stops a generation within one step, in the prompt's prefill as
 * in decoding, and the session answers normally afterwards. No timing decides a result here:
 * the suite's timeout is only a hang guard.
 */
class CancelTest {
  static final List<ChatMessage> LONG_STORY = List.of(ChatMessage.user("Write a very long story about a dragon and a knight."));
  static final int N = 400;  // far more tokens than a cancelled generation gets to
  static Model model;

  @BeforeAll
  static void load() {
    model = PocketLLM.load(TestModels.smollm2().toString(),
                           new ModelParams().session(new SessionParams().threads(TestModels.THREADS).nCtx(1024)));
  }

  @AfterAll
  static void close() {
    if (model != null) model.close();
  }

  /** A prompt of some 600 tokens: its prefill takes many steps (chunks of 64 tokens). */
  static List<ChatMessage> longPrompt() {
    StringBuilder sb = new StringBuilder("Summarise this report.\n");
    for (int i = 0; sb.length() < 2800; i++) {
      sb.append("Section ").append(i).append(": the committee reviewed the budget, the schedule and the staffing plan. ");
    }
    return List.of(ChatMessage.user(sb.toString()));
  }

  /** Starts the long prompt, cancels it from another thread during the prefill, checks how it ended. */
  static void cancelInPrefill(Session s, List<ChatMessage> prompt) throws Exception {
    AtomicInteger tokens = new AtomicInteger();
    Generation g = s.stream(prompt, GenerateOptions.defaults().maxTokens(N), piece -> tokens.incrementAndGet());
    Thread.sleep(50);  // into the prefill (not a pass/fail timing: the assertions say where it stopped)
    Thread canceller = new Thread(g::cancel);
    canceller.start();
    canceller.join();
    assertTrue(g.isDone(), "cancel() returned before the generation ended");
    GenerationStats st = g.await().stats();
    assertEquals(StopReason.CANCELLED, st.stopReason());
    assertEquals(0, st.nGenerated());
    assertEquals(0, tokens.get());
  }

  @Test
  void cancelDuringPrefillFromAnotherThread() throws Exception {
    try (Session s = model.newSession()) {
      cancelInPrefill(s, longPrompt());
      assertEquals(StopReason.EOG, s.chat(TestModels.CAPITAL).stats().stopReason());
    }
  }

  /** The cancel landed inside the prefill: the same prompt again finds less than all of it cached. */
  @Test
  @Tag("numerics")
  void aCancelledPrefillLeavesThePromptUncomputed() throws Exception {
    try (Session s = model.newSession()) {
      List<ChatMessage> prompt = longPrompt();
      cancelInPrefill(s, prompt);
      Completion again = s.chat(prompt, GenerateOptions.defaults().maxTokens(1));
      assertTrue(again.stats().nReused() < again.stats().nPrompt() - 1, again.stats().toString());
    }
  }

  @Test
  void cancelDuringDecodeFromAnotherThread() throws Exception {
    try (Session s = model.newSession()) {
      AtomicInteger tokens = new AtomicInteger();
      CountDownLatch three = new CountDownLatch(3);
      Generation g = s.stream(LONG_STORY, GenerateOptions.defaults().maxTokens(N), piece -> {
        tokens.incrementAndGet();
        three.countDown();
      });
      three.await();
      AtomicInteger atReturn = new AtomicInteger();
      Thread canceller = new Thread(() -> {
        g.cancel();
        atReturn.set(tokens.get());
      });
      canceller.start();
      canceller.join();
      GenerationStats st = g.await().stats();
      assertEquals(StopReason.CANCELLED, st.stopReason());
      assertEquals(atReturn.get(), tokens.get(), "a token arrived after cancel() returned");
      assertTrue(st.nGenerated() >= 3 && st.nGenerated() < 40, st.toString());
      assertTrue(s.chat(TestModels.CAPITAL).text().contains("Paris"));
    }
  }

  @Test
  void cancelFromInsideTheListener() {
    try (Session s = model.newSession()) {
      AtomicReference<Generation> self = new AtomicReference<>();
      AtomicInteger tokens = new AtomicInteger();
      CountDownLatch started = new CountDownLatch(1);
      Generation g = s.stream(LONG_STORY, GenerateOptions.defaults().maxTokens(N), piece -> {
        try {
          started.await();
        } catch (InterruptedException e) {
          throw new IllegalStateException(e);
        }
        if (tokens.incrementAndGet() == 2) self.get().cancel();  // must not wait for itself
      });
      self.set(g);
      started.countDown();
      GenerationStats st = g.await().stats();
      assertEquals(StopReason.CANCELLED, st.stopReason());
      assertEquals(2, st.nGenerated());
    }
  }

  @Test
  void cancelAQueuedGenerationAloneAndSessionCancelStopsAll() throws Exception {
    try (Session s = model.newSession()) {
      CountDownLatch first = new CountDownLatch(1);
      Generation running = s.stream(LONG_STORY, GenerateOptions.defaults().maxTokens(N), piece -> first.countDown());
      Generation queued = s.stream(TestModels.CAPITAL, GenerateOptions.defaults(), piece -> {});
      Generation third = s.stream(TestModels.CAPITAL, GenerateOptions.defaults(), piece -> {});
      first.await();
      queued.cancel();  // only it: the running one goes on
      assertTrue(!running.isDone());
      s.cancel();  // everything started so far
      assertEquals(StopReason.CANCELLED, running.await().stats().stopReason());
      assertEquals(0, queued.await().stats().nGenerated());
      assertEquals(StopReason.CANCELLED, third.await().stats().stopReason());
      assertEquals(0, third.await().stats().nGenerated());
      // a cancel while idle does not stop the next call
      s.cancel();
      assertEquals(StopReason.EOG, s.chat(TestModels.CAPITAL).stats().stopReason());
    }
  }

  @Test
  void cancellingTheFlowSubscriptionStopsTheGeneration() throws Exception {
    try (Session s = model.newSession()) {
      TokenStream stream = s.stream(LONG_STORY, GenerateOptions.defaults().maxTokens(N));
      CountDownLatch done = new CountDownLatch(1);
      AtomicInteger received = new AtomicInteger();
      stream.subscribe(new Flow.Subscriber<String>() {
        Flow.Subscription sub;

        @Override public void onSubscribe(Flow.Subscription s) {
          sub = s;
          s.request(Long.MAX_VALUE);
        }

        @Override public void onNext(String item) {
          if (received.incrementAndGet() == 3) {
            sub.cancel();
            done.countDown();
          }
        }

        @Override public void onError(Throwable t) {}

        @Override public void onComplete() {}
      });
      done.await();
      GenerationStats st = stream.completion().get().stats();
      assertEquals(StopReason.CANCELLED, st.stopReason());
      assertTrue(st.nGenerated() < 40, st.toString());
      assertEquals(3, received.get());  // nothing after cancel
    }
  }

  @Test
  void interruptingABlockingChatCancelsIt() throws Exception {
    try (Session s = model.newSession()) {
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicReference<Boolean> stillInterrupted = new AtomicReference<>();
      CountDownLatch inside = new CountDownLatch(1);
      Thread caller = new Thread(() -> {
        try {
          s.stream(LONG_STORY, GenerateOptions.defaults().maxTokens(N), piece -> inside.countDown()).await();
        } catch (Throwable t) {
          thrown.set(t);
          stillInterrupted.set(Thread.currentThread().isInterrupted());
        }
      });
      caller.start();
      inside.await();
      caller.interrupt();
      caller.join();
      assertTrue(thrown.get() instanceof PocketLLMException.Cancelled, String.valueOf(thrown.get()));
      assertTrue(stillInterrupted.get());
      assertTrue(s.chat(TestModels.CAPITAL).text().contains("Paris"));
    }
  }

  @Test
  void closingDuringAGenerationStopsIt() throws Exception {
    Session s = model.newSession();
    CountDownLatch first = new CountDownLatch(1);
    Generation g = s.stream(LONG_STORY, GenerateOptions.defaults().maxTokens(N), piece -> first.countDown());
    first.await();
    s.close();
    assertEquals(StopReason.CANCELLED, g.await().stats().stopReason());
    assertThrows(PocketLLMException.InvalidArgument.class, () -> s.chat(TestModels.CAPITAL));
  }
}
