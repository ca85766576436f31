package org.pocketllm;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * Entry point of the binding:
 * <pre>{@code
 * try (Model model = PocketLLM.load(path, new ModelParams());
 *      Session session = model.newSession()) {
 *   Completion reply = session.chat(List.of(ChatMessage.user("Hi")), GenerateOptions.defaults());
 * }
 * }</pre>
 */
public final class PocketLLM {
  private PocketLLM() {}

  /** Loads a GGUF model; PocketLLMException (Io, BadFormat, ...) with the engine's message on failure. */
  public static @NonNull Model load(@NonNull String path, @NonNull ModelParams params) {
    return new Model(Objects.requireNonNull(path, "path"), Objects.requireNonNull(params, "params"));
  }

  public static @NonNull Model load(@NonNull String path) {
    return load(path, new ModelParams());
  }

  public static @NonNull String version() {
    return new String(Native.version(), StandardCharsets.UTF_8);
  }

  /** The kernel instruction set chosen at start-up (e.g. "avx2", "dotprod"). */
  public static @NonNull String isa() {
    return new String(Native.isa(), StandardCharsets.UTF_8);
  }

  /** Threads a session uses by default: one per performance core. */
  public static int defaultThreads() {
    return Native.defaultThreads();
  }
}
