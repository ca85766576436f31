package org.pocketllm;

/**
 * The JNI library's methods (bindings/java/src/main/cpp), registered by its JNI_OnLoad. Text
 * crosses as UTF-8 byte[] both ways; handles are the C pointers as long. Every method that can
 * fail throws the PocketLLMException of the C status with pllm_last_error()'s message.
 */
final class Native {
  private Native() {}

  static {
    Library.load();  // its JNI_OnLoad registers the methods below
  }

  static native byte[] version();
  static native byte[] isa();
  static native int defaultThreads();

  static native long modelLoad(byte[] path, int vocabOnly, int repack, int chatTemplate);
  static native void modelFree(long model);
  /** {n_vocab, n_ctx_train, bos, eos, add_bos}. */
  static native int[] modelInfo(long model);
  static native boolean modelIsEog(long model, int token);
  static native int activationsParse(byte[] word);
  static native int activationsRepack(int activations);
  static native int[] tokenize(long model, byte[] text, boolean addSpecial, boolean parseSpecial);
  static native int[] tokenizePrompt(long model, byte[] text);
  static native byte[] detokenize(long model, int[] tokens, boolean renderSpecial);
  static native byte[] applyTemplate(long model, byte[][] roles, byte[][] contents, boolean addGenerationPrompt,
                                     byte[] variablesJson);

  /** fields: SessionParams.toNative(). */
  static native long sessionCreate(long model, int[] fields);
  static native void sessionFree(long session);
  static native void sessionReset(long session);
  static native int sessionNCtx(long session);
  /** Cancels generation {@code id} alone, or every one up to it; with wait, returns once none of them runs. */
  static native void sessionCancel(long session, long id, boolean onlyThis, boolean wait);
  /** Runs generation number {@code id}; returns GenerationStats' fields. */
  static native double[] generate(long session, long id, int[] prompt, double[] sampling, long seed, boolean hasSeed,
                                  byte[][] stops, long grammar, TokenSink sink);

  /** kind: ResponseFormat's (pllm_grammar_kind); text null for any JSON. */
  static native long grammarCreate(long model, int kind, byte[] text);
  static native void grammarFree(long grammar);
  static native long toolsCreate(long model, byte[] toolsJson, byte[] toolChoiceJson, boolean parallel);
  static native void toolsFree(long tools);
  /** The tools' grammar (owned by them). */
  static native long toolsGrammar(long tools);
  static native byte[] applyTemplateJson(long model, byte[] messagesJson, long tools, boolean addGenerationPrompt,
                                         byte[] variablesJson);
  /** {content or null, id, name, arguments per call..., the reply's whole JSON}. */
  static native byte[][] toolsParse(long tools, int[] tokens);
}
