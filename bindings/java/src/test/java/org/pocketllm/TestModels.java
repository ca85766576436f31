package org.pocketllm;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The models the tests load: the real SmolLM2 (POCKETLLM_MODELS, as the other suites; tests
 * that need it are skipped with a message when it is missing) and a tiny random-weight model
 * that scripts/test_java.sh writes with tests/py/tiny_models.py (system property
 * pocketllm.tinyModel).
 */
final class TestModels {
  private TestModels() {}

  static final String SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf";
  /** Threads per session (default 1: CI machines have two cores and some tests run four sessions). */
  static final int THREADS = Integer.parseInt(System.getenv().getOrDefault("POCKETLLM_TEST_THREADS", "1"));
  static final List<ChatMessage> CAPITAL = List.of(ChatMessage.user("What is the capital of France?"));

  static Path smollm2() {
    String dir = System.getenv("POCKETLLM_MODELS");
    Path p = Path.of(dir != null ? dir : "models").resolve(SMOLLM2);
    assumeTrue(Files.isRegularFile(p), "real model not found at " + p + " (scripts/fetch_model.sh, or POCKETLLM_MODELS)");
    return p;
  }

  static Path tiny() {
    String p = System.getProperty("pocketllm.tinyModel");
    assumeTrue(p != null && Files.isRegularFile(Path.of(p)), "tiny model not given (-Dpocketllm.tinyModel)");
    return Path.of(p);
  }

  static ModelParams params() {
    return new ModelParams().session(new SessionParams().threads(THREADS));
  }

  static Model loadSmollm2() {
    return PocketLLM.load(smollm2().toString(), params());
  }
}
