package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * 1,000 load / session / generate / close cycles on the tiny model leave the process's resident
 * memory where it was: a leaked model (its weights, a few MiB) or session (its KV cache) per
 * cycle would add hundreds of MiB.
 */
class LeakTest {
  static final int WARMUP = 100;
  static final int CYCLES = 1000;
  static final long BOUND_KIB = 48 * 1024;

  static long rssKib() throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    }
    throw new IllegalStateException("no VmRSS in /proc/self/status");
  }

  static void cycle(String path, int i) {
    try (Model m = PocketLLM.load(path, TestModels.params()); Session s = m.newSession()) {
      Completion c = s.complete("hello", GenerateOptions.defaults().maxTokens(2).temperature(1).seed(i));
      assertTrue(c.stats().nGenerated() <= 2);
    }
  }

  @Test
  void thousandLoadCloseCyclesDoNotGrowMemory() throws Exception {
    assumeTrue(Files.isReadable(Path.of("/proc/self/status")), "needs /proc (Linux)");
    String path = TestModels.tiny().toString();
    for (int i = 0; i < WARMUP; i++) cycle(path, i);
    System.gc();
    long before = rssKib();
    for (int i = 0; i < CYCLES; i++) cycle(path, i);
    System.gc();
    long after = rssKib();
    assertTrue(after - before < BOUND_KIB, "RSS grew by " + (after - before) + " KiB over " + CYCLES + " cycles");
  }
}
