package org.pocketllm;

/** A finished reply: its text and what the generation did. */
public final class Completion {
  private final String text;
  private final GenerationStats stats;

  Completion(String text, GenerationStats stats) {
    this.text = text;
    this.stats = stats;
  }

  public @NonNull String text() {
    return text;
  }

  public @NonNull GenerationStats stats() {
    return stats;
  }

  @Override
  public String toString() {
    return text;
  }
}
