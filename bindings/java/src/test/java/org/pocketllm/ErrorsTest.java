package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every failure is a Java exception of the C status's class with the engine's message; nothing crashes. */
class ErrorsTest {
  @TempDir Path tmp;

  @Test
  void badPathIsIoWithTheEnginesMessage() {
    String path = tmp.resolve("missing.gguf").toString();
    PocketLLMException e = assertThrows(PocketLLMException.Io.class, () -> PocketLLM.load(path));
    assertEquals(2, e.status());
    assertTrue(e.getMessage().contains(path) && e.getMessage().contains("cannot open"), e.getMessage());
  }

  @Test
  void corruptFilesAreBadFormat() throws IOException {
    Path garbage = tmp.resolve("garbage.gguf");
    Files.write(garbage, "this is not a GGUF file at all, just text".getBytes());
    PocketLLMException e = assertThrows(PocketLLMException.BadFormat.class, () -> PocketLLM.load(garbage.toString()));
    assertTrue(e.getMessage().contains("GGUF") || e.getMessage().contains("magic"), e.getMessage());

    byte[] tiny = Files.readAllBytes(TestModels.tiny());
    Path truncated = tmp.resolve("truncated.gguf");
    Files.write(truncated, Arrays.copyOf(tiny, tiny.length / 2));
    PocketLLMException t = assertThrows(PocketLLMException.class, () -> PocketLLM.load(truncated.toString()));
    assertTrue(t instanceof PocketLLMException.BadFormat || t instanceof PocketLLMException.Io, t.toString());
    assertTrue(!t.getMessage().isEmpty());

    Path empty = tmp.resolve("empty.gguf");
    Files.write(empty, new byte[0]);
    assertThrows(PocketLLMException.class, () -> PocketLLM.load(empty.toString()));
  }

  @Test
  void closeTwiceAndUseAfterClose() {
    Model model = PocketLLM.load(TestModels.tiny().toString(), TestModels.params());
    Session session = model.newSession();
    model.close();
    model.close();  // idempotent
    assertTrue(model.isClosed());
    PocketLLMException e = assertThrows(PocketLLMException.InvalidArgument.class, () -> model.tokenize("x"));
    assertEquals("the model is closed", e.getMessage());
    assertThrows(PocketLLMException.InvalidArgument.class, model::newSession);
    // the session keeps the weights: it still generates
    assertEquals(3, session.chat(TestModels.CAPITAL, GenerateOptions.defaults().maxTokens(3).temperature(1).seed(1))
                        .stats().nGenerated());
    session.close();
    session.close();
    assertEquals("the session is closed",
                 assertThrows(PocketLLMException.InvalidArgument.class, () -> session.chat(TestModels.CAPITAL)).getMessage());
    assertThrows(PocketLLMException.InvalidArgument.class, session::reset);
    assertThrows(PocketLLMException.InvalidArgument.class, session::nCtx);
    session.cancel();  // a no-op once closed
  }

  @Test
  void badArgumentsCarryTheEnginesMessage() {
    PocketLLMException act = assertThrows(PocketLLMException.InvalidArgument.class,
        () -> PocketLLM.load(TestModels.tiny().toString(), new ModelParams().session(new SessionParams().activations("int7"))));
    assertTrue(act.getMessage().contains("int16") && act.getMessage().contains("exact"), act.getMessage());
    try (Model model = PocketLLM.load(TestModels.tiny().toString(), TestModels.params());
         Session s = model.newSession(new SessionParams().threads(1).nCtx(64))) {
      StringBuilder big = new StringBuilder();
      for (int i = 0; i < 200; i++) big.append("word ");
      PocketLLMException range = assertThrows(PocketLLMException.OutOfRange.class,
          () -> s.complete(big.toString(), GenerateOptions.defaults()));
      assertTrue(range.getMessage().contains("does not fit the context of 64"), range.getMessage());
      assertThrows(PocketLLMException.InvalidArgument.class,
          () -> s.chat(TestModels.CAPITAL, GenerateOptions.defaults().templateVariablesJson("{not json")));
      assertThrows(PocketLLMException.InvalidArgument.class,
          () -> s.chat(List.of(ChatMessage.user("a\0b"))));
      assertThrows(PocketLLMException.InvalidArgument.class,
          () -> s.chat(TestModels.CAPITAL, GenerateOptions.defaults().maxTokens(-1)));
      assertThrows(PocketLLMException.InvalidArgument.class,
          () -> s.start(new int[] {model.nVocab() + 5}, GenerateOptions.defaults(), piece -> {}).await());
      assertThrows(PocketLLMException.InvalidArgument.class,
          () -> model.newSession(new SessionParams().nCtx(-5)));
      // after all that, the session still works
      assertEquals(2, s.chat(TestModels.CAPITAL, GenerateOptions.defaults().maxTokens(2).temperature(1).seed(3))
                          .stats().nGenerated());
    }
  }

  @Test
  void aListenersExceptionStopsTheGenerationAndIsRethrown() {
    try (Model model = PocketLLM.load(TestModels.tiny().toString(), TestModels.params());
         Session s = model.newSession()) {
      AtomicReference<Throwable> seen = new AtomicReference<>();
      Generation g = s.stream(TestModels.CAPITAL, GenerateOptions.defaults().maxTokens(50).temperature(1).seed(2),
          new StreamListener() {
            @Override public void onToken(String piece) {
              throw new IllegalStateException("listener failed");
            }

            @Override public void onError(Throwable error) {
              seen.set(error);
            }
          });
      IllegalStateException e = assertThrows(IllegalStateException.class, g::await);
      assertEquals("listener failed", e.getMessage());
      assertTrue(seen.get() == e);
      assertEquals(2, s.chat(TestModels.CAPITAL, GenerateOptions.defaults().maxTokens(2).temperature(1).seed(3))
                          .stats().nGenerated());
    }
  }
}
