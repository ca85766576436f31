package org.pocketllm;

import java.util.Collections;
import java.util.List;

/** A reply that may call tools: its text, the calls (valid against their schemas) and the generation's stats. */
public final class ToolReply {
  /** One call: {@code arguments} is JSON text of an object. */
  public static final class ToolCall {
    private final String id;
    private final String name;
    private final String arguments;

    ToolCall(String id, String name, String arguments) {
      this.id = id;
      this.name = name;
      this.arguments = arguments;
    }

    public @NonNull String id() {
      return id;
    }

    public @NonNull String name() {
      return name;
    }

    public @NonNull String arguments() {
      return arguments;
    }
  }

  private final @Nullable String content;
  private final List<ToolCall> toolCalls;
  private final String json;
  private final GenerationStats stats;

  ToolReply(@Nullable String content, List<ToolCall> toolCalls, String json, GenerationStats stats) {
    this.content = content;
    this.toolCalls = Collections.unmodifiableList(toolCalls);
    this.json = json;
    this.stats = stats;
  }

  /** The text besides the calls; null when the reply is only calls. */
  public @Nullable String content() {
    return content;
  }

  public @NonNull List<ToolCall> toolCalls() {
    return toolCalls;
  }

  /**
   * The reply as OpenAI's assistant message fields: {"content", "tool_calls": [{"id", "type",
   * "function": {"name", "arguments"}}]}, ready to go back into the next turn's messages.
   */
  public @NonNull String json() {
    return json;
  }

  public @NonNull GenerationStats stats() {
    return stats;
  }
}
