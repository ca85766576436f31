package org.pocketllm;

import java.lang.ref.Cleaner;

/**
 * A request's tools compiled for one model (pllm_tools_create): OpenAI's {@code tools} list as
 * JSON, a {@code tool_choice} ("\"auto\"", "\"none\"", "\"required\"" or a function object, as
 * JSON; null: auto) and whether several calls may come in one reply. The choice is enforced by a
 * grammar. Use with {@link Session#chat(String, Tools, GenerateOptions)}. AutoCloseable; a
 * Cleaner frees it if it is dropped unclosed.
 */
public final class Tools implements AutoCloseable {
  final NativeHandle handle;
  private final Cleaner.Cleanable cleanable;

  Tools(long modelPtr, byte[] toolsJson, byte[] toolChoiceJson, boolean parallel) {
    long ptr = Native.toolsCreate(modelPtr, toolsJson, toolChoiceJson, parallel);
    handle = new NativeHandle("tools", ptr, Native::toolsFree);
    cleanable = Workers.CLEANER.register(this, handle);
  }

  public boolean isClosed() {
    return handle.isClosed();
  }

  /** Idempotent; a generation still using the tools keeps them until it ends. */
  @Override
  public void close() {
    cleanable.clean();
  }
}
