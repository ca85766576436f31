package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Answers from the real model, blocking and streamed (listener and Flow), greedy. */
class ChatTest {
  static Model model;

  @BeforeAll
  static void load() {
    model = TestModels.loadSmollm2();
  }

  @AfterAll
  static void close() {
    if (model != null) model.close();
  }

  @Test
  void capitalOfFranceIsParis() {
    try (Session s = model.newSession()) {
      Completion reply = s.chat(TestModels.CAPITAL);
      assertTrue(reply.text().contains("Paris"), reply.text());
      assertEquals(StopReason.EOG, reply.stats().stopReason());
      assertTrue(reply.stats().nGenerated() > 0 && reply.stats().nPrompt() > 0);
    }
  }

  @Test
  @Tag("numerics")
  void streamedPiecesJoinedEqualTheBlockingAnswer() throws Exception {
    List<ChatMessage> ask = List.of(ChatMessage.user("Name three colours of the rainbow."));
    GenerateOptions greedy = GenerateOptions.defaults().temperature(0).maxTokens(48);
    try (Session s = model.newSession()) {
      String blocking = s.chat(ask, greedy).text();
      s.reset();
      List<String> pieces = new ArrayList<>();
      List<Thread> threads = new ArrayList<>();
      Completion streamed = s.stream(ask, greedy, piece -> {
        pieces.add(piece);
        threads.add(Thread.currentThread());
      }).await();
      assertTrue(pieces.size() > 1);
      assertEquals(blocking, String.join("", pieces));
      assertEquals(blocking, streamed.text());
      // on the binding's worker thread, never the caller's
      assertTrue(threads.stream().allMatch(t -> t != Thread.currentThread() && t.getName().startsWith("pocketllm-")));

      s.reset();
      TokenStream publisher = s.stream(ask, greedy);
      CompletableFuture<List<String>> got = new CompletableFuture<>();
      publisher.subscribe(new Flow.Subscriber<String>() {
        final List<String> items = new ArrayList<>();
        Flow.Subscription sub;

        @Override public void onSubscribe(Flow.Subscription s) {
          sub = s;
          s.request(1);  // one at a time: backpressure
        }

        @Override public void onNext(String item) {
          items.add(item);
          sub.request(1);
        }

        @Override public void onError(Throwable t) {
          got.completeExceptionally(t);
        }

        @Override public void onComplete() {
          got.complete(items);
        }
      });
      assertEquals(pieces, got.get());
      assertEquals(blocking, publisher.completion().get().text());
    }
  }

  @Test
  void aSecondTurnReusesTheFirstTurnsCache() {
    try (Session s = model.newSession()) {
      Completion first = s.chat(TestModels.CAPITAL);
      List<ChatMessage> more = List.of(TestModels.CAPITAL.get(0), ChatMessage.assistant(first.text()),
                                       ChatMessage.user("And of Germany?"));
      Completion second = s.chat(more);
      assertTrue(second.stats().nReused() >= first.stats().nPrompt(), second.stats().toString());
      assertTrue(second.text().contains("Berlin"), second.text());
    }
  }

  @Test
  void stopStringsAndMaxTokens() {
    try (Session s = model.newSession()) {
      Completion cut = s.chat(TestModels.CAPITAL, GenerateOptions.defaults().maxTokens(2));
      assertEquals(StopReason.MAX_TOKENS, cut.stats().stopReason());
      assertEquals(2, cut.stats().nGenerated());
      Completion stopped = s.chat(TestModels.CAPITAL, GenerateOptions.defaults().stop(List.of("Paris")));
      assertEquals(StopReason.STOP_STRING, stopped.stats().stopReason());
      assertTrue(!stopped.text().contains("Paris") && !stopped.text().isEmpty(), stopped.text());
    }
  }
}
