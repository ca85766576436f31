package org.pocketllm;

/** What one generation did (pllm_generation_stats). */
public final class GenerationStats {
  private final double[] f;  // jni_session.cpp StatsField order

  GenerationStats(double[] fields) {
    this.f = fields.clone();
  }

  /** Prompt tokens. */
  public int nPrompt() {
    return (int) f[0];
  }

  /** Of them already in the session's KV cache. */
  public int nReused() {
    return (int) f[1];
  }

  /** Of them restored from a prefix cache. */
  public int nCached() {
    return (int) f[2];
  }

  public int nGenerated() {
    return (int) f[3];
  }

  /** From the call to the first generated token. */
  public double ttftMs() {
    return f[4];
  }

  public double prefillTokensPerSecond() {
    return f[5];
  }

  public double decodeTokensPerSecond() {
    return f[6];
  }

  public @NonNull StopReason stopReason() {
    return StopReason.of((int) f[7]);
  }

  @Override
  public String toString() {
    return "GenerationStats{prompt=" + nPrompt() + ", reused=" + nReused() + ", generated=" + nGenerated()
        + ", ttftMs=" + ttftMs() + ", stop=" + stopReason() + "}";
  }
}
