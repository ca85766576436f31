package org.pocketllm;

import java.util.Objects;

/** One turn of a conversation: role "system", "user" or "assistant", and its text. */
public final class ChatMessage {
  private final String role;
  private final String content;

  public ChatMessage(@NonNull String role, @NonNull String content) {
    this.role = Objects.requireNonNull(role, "role");
    this.content = Objects.requireNonNull(content, "content");
  }

  public static @NonNull ChatMessage system(@NonNull String content) {
    return new ChatMessage("system", content);
  }

  public static @NonNull ChatMessage user(@NonNull String content) {
    return new ChatMessage("user", content);
  }

  public static @NonNull ChatMessage assistant(@NonNull String content) {
    return new ChatMessage("assistant", content);
  }

  public @NonNull String role() {
    return role;
  }

  public @NonNull String content() {
    return content;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ChatMessage && ((ChatMessage) o).role.equals(role) && ((ChatMessage) o).content.equals(content);
  }

  @Override
  public int hashCode() {
    return Objects.hash(role, content);
  }

  @Override
  public String toString() {
    return role + ": " + content;
  }
}
