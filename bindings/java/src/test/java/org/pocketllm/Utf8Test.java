package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Text crosses the JNI boundary as UTF-8 bytes both ways: emoji (outside the BMP, which
 * modified UTF-8 would mangle), CJK, and characters whose bytes the model produces over
 * several tokens arrive whole.
 */
class Utf8Test {
  static final String MIXED = "héllo 世界 😀🎉 naïve ∑ 𝄞";
  static Model model;

  @BeforeAll
  static void load() {
    model = TestModels.loadSmollm2();
  }

  @AfterAll
  static void close() {
    if (model != null) model.close();
  }

  /** Decodes strictly: malformed or partial UTF-8 throws. */
  static String strictUtf8(byte[] bytes) throws CharacterCodingException {
    return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString();
  }

  @Test
  void tokenizeDetokenizeRoundTrip() {
    int[] ids = model.tokenize(MIXED, false, false);
    assertEquals(MIXED, model.detokenize(ids));
    assertArrayEquals(MIXED.getBytes(StandardCharsets.UTF_8), model.detokenizeUtf8(ids, false));
  }

  @Test
  void anEmojiSplitOverTokensHasPartialBytesPerToken() {
    byte[] whole = "😀".getBytes(StandardCharsets.UTF_8);
    int[] ids = model.tokenize("😀", false, false);
    assertTrue(ids.length > 1, "the byte-level vocabulary splits this emoji: " + Arrays.toString(ids));
    byte[] first = model.detokenizeUtf8(new int[] {ids[0]}, false);
    assertTrue(first.length < whole.length);
    assertArrayEquals(Arrays.copyOf(whole, first.length), first);  // the emoji's first bytes, unchanged
    assertThrowsCoding(first);
  }

  static void assertThrowsCoding(byte[] partial) {
    try {
      strictUtf8(partial);
    } catch (CharacterCodingException expected) {
      return;
    }
    throw new AssertionError("a partial character decoded: " + Arrays.toString(partial));
  }

  @Test
  void chatTemplateKeepsEmojiAndCjk() {
    String text = model.applyChatTemplate(List.of(ChatMessage.user(MIXED)), true, null);
    assertTrue(text.contains(MIXED), text);
  }

  @Test
  void streamedEmojiArriveWhole() throws Exception {
    List<String> pieces = new ArrayList<>();
    try (Session s = model.newSession()) {
      Completion reply = s.stream(List.of(ChatMessage.user("Copy this text exactly: 🎉 Party time 🎉")),
                                  GenerateOptions.defaults().maxTokens(24), pieces::add).await();
      assertEquals("🎉 Party time 🎉", reply.text().strip());
      assertEquals(reply.text(), String.join("", pieces));
      // the emoji took several tokens each, yet every piece is whole characters
      assertTrue(model.tokenize("🎉", false, false).length > 1);
      assertTrue(pieces.size() < reply.stats().nGenerated(), pieces + " vs " + reply.stats());
      for (String p : pieces) assertFalse(p.contains("\uFFFD"), p);
    }
  }

  @Test
  void streamedCjkArrivesWhole() {
    try (Session s = model.newSession()) {
      List<String> pieces = new ArrayList<>();
      Completion reply = s.stream(List.of(ChatMessage.user("What is 你好 in English?")),
                                  GenerateOptions.defaults().maxTokens(16), pieces::add).await();
      assertTrue(reply.text().contains("你好"), reply.text());
      for (String p : pieces) assertFalse(p.contains("\uFFFD"), p);
    }
  }

  /**
   * The byte path itself, below the Java API: random sampling on the tiny random-weight model
   * emits arbitrary byte tokens, so multi-byte characters are split across tokens (and invalid
   * sequences occur, which the engine replaces). Every piece the JNI library hands over must be
   * valid UTF-8 on its own, and the pieces must add up to the generation's text.
   */
  @Test
  void everyPieceOfARandomByteStreamIsValidUtf8() throws Exception {
    long m = Native.modelLoad(TestModels.tiny().toString().getBytes(StandardCharsets.UTF_8), 0, 0, 0);
    long s = 0;
    try {
      s = Native.sessionCreate(m, new SessionParams().threads(1).toNative());
      int[] prompt = Native.tokenize(m, "abc def".getBytes(StandardCharsets.UTF_8), true, false);
      // hot enough that the tiny model leaves its loops for the byte tokens above 0x7f
      double[] sampling = GenerateOptions.defaults().maxTokens(200).temperature(3.0).topK(0).topP(1).minP(0)
          .samplingToNative();
      ByteArrayOutputStream all = new ByteArrayOutputStream();
      List<byte[]> pieces = new ArrayList<>();
      List<Integer> tokens = new ArrayList<>();
      double[] stats = Native.generate(s, 1, prompt, sampling, 7, true, new byte[0][], 0, (token, utf8) -> {
        pieces.add(utf8);
        tokens.add(token);
        all.writeBytes(utf8);
      });
      GenerationStats st = new GenerationStats(stats);
      assertTrue(st.nGenerated() > 50, st.toString());
      StringBuilder joined = new StringBuilder();
      for (byte[] p : pieces) joined.append(strictUtf8(p));
      String text = strictUtf8(all.toByteArray());
      assertEquals(text, joined.toString());
      assertTrue(text.codePoints().anyMatch(c -> c > 0x7f && c != 0xFFFD), "no multi-byte character: " + text);
      // Some piece holds bytes of earlier tokens too: a character begun by one token and finished
      // by the next arrived whole, in the piece of the token that completed it.
      boolean split = false;
      for (int i = 0; i < pieces.size() && !split; i++) {
        byte[] own = Native.detokenize(m, new int[] {tokens.get(i)}, false);
        byte[] piece = pieces.get(i);
        split = own.length > 0 && own.length < piece.length
            && Arrays.equals(own, Arrays.copyOfRange(piece, piece.length - own.length, piece.length));
      }
      assertTrue(split, "no character split across tokens in: " + text);
    } finally {
      if (s != 0) Native.sessionFree(s);
      Native.modelFree(m);
    }
  }
}
