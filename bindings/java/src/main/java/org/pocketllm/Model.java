package org.pocketllm;

import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Objects;

/**
 * A loaded GGUF model: weights (mapped once, shared read-only by its sessions), tokenizer and
 * chat template. Thread-safe. close() lets go of it; the weights are freed once the sessions
 * made from it are closed too. A Cleaner frees a model that was never closed once it is
 * unreachable, but close it (try-with-resources, Kotlin's use {}) to free memory promptly.
 */
public final class Model implements AutoCloseable {
  final NativeHandle handle;
  private final SessionParams sessionDefaults;
  private final int[] info;  // {n_vocab, n_ctx_train, bos, eos, add_bos}
  private final Cleaner.Cleanable cleanable;

  Model(String path, ModelParams params) {
    sessionDefaults = params.session();
    sessionDefaults.toNative();  // a bad setting fails here, before the (slow) load
    long ptr = Native.modelLoad(path.getBytes(StandardCharsets.UTF_8), params.vocabOnly() ? 1 : 0,
                                params.repackValue(), params.chatTemplateValue());
    handle = new NativeHandle("model", ptr, Native::modelFree);
    cleanable = Workers.CLEANER.register(this, handle);
    info = Native.modelInfo(ptr);
  }

  /** A session (its own conversation and KV cache) with the model's session settings. */
  public @NonNull Session newSession() {
    return new Session(this, sessionDefaults);
  }

  public @NonNull Session newSession(@NonNull SessionParams params) {
    return new Session(this, Objects.requireNonNull(params, "params"));
  }

  /** Token ids of text: with addSpecial the BOS the model wants; with parseSpecial "<|im_start|>" and such become their ids. */
  public int @NonNull [] tokenize(@NonNull String text, boolean addSpecial, boolean parseSpecial) {
    byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
    long p = handle.acquire();
    try {
      return Native.tokenize(p, utf8, addSpecial, parseSpecial);
    } finally {
      handle.release();
    }
  }

  public int @NonNull [] tokenize(@NonNull String text) {
    return tokenize(text, true, false);
  }

  /** A prompt's tokens as chat() makes them (pllm_tokenize_prompt): specials parsed, one BOS. */
  public int @NonNull [] promptTokens(@NonNull String text) {
    long p = handle.acquire();
    try {
      return promptTokens(p, text);
    } finally {
      handle.release();
    }
  }

  /** (Callers keep modelPtr alive: a Model's own handle, or a Session's hold on it.) */
  static int[] promptTokens(long modelPtr, String text) {
    return Native.tokenizePrompt(modelPtr, text.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The text of token ids (special tokens written out with renderSpecial). A slice of a
   * sequence may cut a character in two: those bytes become U+FFFD.
   */
  public @NonNull String detokenize(int @NonNull [] tokens, boolean renderSpecial) {
    return new String(detokenizeUtf8(tokens, renderSpecial), StandardCharsets.UTF_8);
  }

  public @NonNull String detokenize(int @NonNull [] tokens) {
    return detokenize(tokens, false);
  }

  /** The exact bytes of the tokens' text (which may end inside a character). */
  public byte @NonNull [] detokenizeUtf8(int @NonNull [] tokens, boolean renderSpecial) {
    Objects.requireNonNull(tokens, "tokens");
    long p = handle.acquire();
    try {
      return Native.detokenize(p, tokens, renderSpecial);
    } finally {
      handle.release();
    }
  }

  /**
   * The conversation rendered with the model's chat template (what chat() generates from).
   * variablesJson: a JSON object of variables the template reads, e.g. {"enable_thinking": false}, or null.
   */
  public @NonNull String applyChatTemplate(@NonNull List<ChatMessage> messages, boolean addGenerationPrompt,
                                           @Nullable String variablesJson) {
    long p = handle.acquire();
    try {
      return applyChatTemplate(p, messages, addGenerationPrompt, variablesJson);
    } finally {
      handle.release();
    }
  }

  static String applyChatTemplate(long modelPtr, List<ChatMessage> messages, boolean addGenerationPrompt,
                                  @Nullable String variablesJson) {
    byte[][] roles = new byte[messages.size()][];
    byte[][] contents = new byte[messages.size()][];
    for (int i = 0; i < roles.length; i++) {
      ChatMessage m = Objects.requireNonNull(messages.get(i), "message");
      roles[i] = m.role().getBytes(StandardCharsets.UTF_8);
      contents[i] = m.content().getBytes(StandardCharsets.UTF_8);
    }
    byte[] vars = variablesJson == null ? null : variablesJson.getBytes(StandardCharsets.UTF_8);
    return new String(Native.applyTemplate(modelPtr, roles, contents, addGenerationPrompt, vars),
                      StandardCharsets.UTF_8);
  }

  /**
   * Tools for {@link Session#chat(String, Tools, GenerateOptions)}: OpenAI's tools list (JSON),
   * a tool_choice (JSON; null: "auto") and whether several calls may come in one reply. Errors
   * name the field (tools[1].function.name: ...) or the schema keyword that cannot be enforced.
   */
  public @NonNull Tools tools(@NonNull String toolsJson, @Nullable String toolChoiceJson, boolean parallelToolCalls) {
    java.util.Objects.requireNonNull(toolsJson, "toolsJson");
    long p = handle.acquire();
    try {
      return new Tools(p, toolsJson.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                       toolChoiceJson == null ? null : toolChoiceJson.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                       parallelToolCalls);
    } finally {
      handle.release();
    }
  }

  public int nVocab() {
    return info[0];
  }

  public int nCtxTrain() {
    return info[1];
  }

  /** The beginning-of-sequence token, or null when the model has none. */
  public @Nullable Integer bos() {
    return info[2] >= 0 ? info[2] : null;
  }

  public @Nullable Integer eos() {
    return info[3] >= 0 ? info[3] : null;
  }

  /** True for the tokens that end the model's turn. */
  public boolean isEndOfGeneration(int token) {
    long p = handle.acquire();
    try {
      return Native.modelIsEog(p, token);
    } finally {
      handle.release();
    }
  }

  public boolean isClosed() {
    return handle.isClosed();
  }

  /** Idempotent. Sessions made from the model keep working until they are closed. */
  @Override
  public void close() {
    cleanable.clean();
  }
}
