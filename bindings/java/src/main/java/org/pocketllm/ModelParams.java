package org.pocketllm;

/**
 * How a model is loaded (pllm_model_params) and the settings of its sessions ({@link #session}),
 * which {@code model.newSession()} uses unless given others.
 */
public final class ModelParams {
  /** How the chat template is rendered (pllm_model_params.chat_template). */
  public enum ChatTemplate { FILE, NATIVE }

  private boolean vocabOnly;
  private @Nullable Boolean repack;
  private ChatTemplate chatTemplate = ChatTemplate.FILE;
  private SessionParams session = new SessionParams();

  /** Load only the tokenizer (tokenize, templates; no sessions). */
  public @NonNull ModelParams vocabOnly(boolean vocabOnly) {
    this.vocabOnly = vocabOnly;
    return this;
  }

  /**
   * Hold weights as repacked panels: true every panel type, false none, null (the default)
   * what suits the sessions' activation mode (pllm_activations_repack).
   */
  public @NonNull ModelParams repack(@Nullable Boolean repack) {
    this.repack = repack;
    return this;
  }

  public @NonNull ModelParams chatTemplate(@NonNull ChatTemplate chatTemplate) {
    this.chatTemplate = chatTemplate;
    return this;
  }

  /** The settings of the model's sessions (copied). */
  public @NonNull ModelParams session(@NonNull SessionParams session) {
    this.session = new SessionParams(session);
    return this;
  }

  public @NonNull SessionParams session() {
    return new SessionParams(session);
  }

  boolean vocabOnly() {
    return vocabOnly;
  }

  int repackValue() {  // PLLM_REPACK_ON 1, _OFF -1, or what the activation mode wants
    if (repack != null) return repack ? 1 : -1;
    return Native.activationsRepack(session.activationsValue());
  }

  int chatTemplateValue() {
    return chatTemplate.ordinal();
  }
}
