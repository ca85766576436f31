package org.pocketllm;

import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntConsumer;

/**
 * One conversation over a model's weights: its own KV cache, so several sessions of one model
 * hold separate conversations and may run on separate threads. Each call passes the whole
 * conversation; the session reuses the longest prefix its KV cache already holds, so a chat
 * costs only the new turn.
 *
 * <p>Generations run on the session's own worker thread, one at a time in the order they were
 * started; the blocking calls wait for theirs. {@link #cancel()} works from any thread.
 */
public final class Session implements AutoCloseable {
  private final NativeHandle handle;
  private final long modelPtr;  // alive while the session is: the session holds the model's handle
  private final ThreadPoolExecutor worker;
  private final Lifetime lifetime;
  private final Cleaner.Cleanable cleanable;

  /** What close() and the Cleaner need, without a reference to the Session. */
  private static final class Lifetime implements Runnable {
    final NativeHandle handle;
    final ThreadPoolExecutor worker;
    final AtomicLong lastId = new AtomicLong();  // generations are numbered 1, 2, ...
    volatile Thread runner;  // the worker thread while a generation runs

    Lifetime(NativeHandle handle, ThreadPoolExecutor worker) {
      this.handle = handle;
      this.worker = worker;
    }

    void cancel(long id, boolean onlyThis) {
      long p = handle.tryAcquire();
      if (p == 0) return;
      try {
        // Waiting on the worker itself (a listener cancelling) would wait for itself.
        Native.sessionCancel(p, id, onlyThis, Thread.currentThread() != runner);
      } finally {
        handle.release();
      }
    }

    @Override
    public void run() {  // close: stop everything started, free once the last generation let go
      cancel(Long.MAX_VALUE, false);
      handle.close();
      worker.shutdown();
    }
  }

  Session(Model model, SessionParams params) {
    int[] fields = params.toNative();
    NativeHandle modelHandle = model.handle;
    long mp = modelHandle.acquire();  // released when the session is freed
    long sp;
    try {
      sp = Native.sessionCreate(mp, fields);
    } catch (RuntimeException e) {
      modelHandle.release();
      throw e;
    }
    modelPtr = mp;
    handle = new NativeHandle("session", sp, p -> {
      Native.sessionFree(p);
      modelHandle.release();
    });
    worker = Workers.sessionWorker();
    lifetime = new Lifetime(handle, worker);
    cleanable = Workers.CLEANER.register(this, lifetime);
  }

  // ---- blocking ---------------------------------------------------------------------------

  /** The reply to a conversation, with the model's chat template. Waits for it (see Generation.await). */
  public @NonNull Completion chat(@NonNull List<ChatMessage> messages, @NonNull GenerateOptions options) {
    return stream(messages, options, NO_LISTENER).await();
  }

  public @NonNull Completion chat(@NonNull List<ChatMessage> messages) {
    return chat(messages, GenerateOptions.defaults());
  }

  /** Continues raw text: no chat template; special tokens written in it are parsed, BOS added when the model wants one. */
  public @NonNull Completion complete(@NonNull String prompt, @NonNull GenerateOptions options) {
    return start(promptTokens(prompt), options, NO_LISTENER).await();
  }

  // ---- streaming --------------------------------------------------------------------------

  /** Streams the reply to listener (on the session's worker thread); returns at once. */
  public @NonNull Generation stream(@NonNull List<ChatMessage> messages, @NonNull GenerateOptions options,
                                    @NonNull StreamListener listener) {
    return start(chatTokens(messages, options), options, listener);
  }

  /** The reply as a Flow.Publisher of text pieces; generation starts when it is subscribed to. */
  public @NonNull TokenStream stream(@NonNull List<ChatMessage> messages, @NonNull GenerateOptions options) {
    return new TokenStream(this, chatTokens(messages, options), options);
  }

  /** Generates from prompt tokens (the whole context), streaming to listener; returns at once. */
  public @NonNull Generation start(int @NonNull [] promptTokens, @NonNull GenerateOptions options,
                                   @NonNull StreamListener listener) {
    return start(promptTokens, options, listener, null, null);
  }

  /**
   * The reply to a conversation given as OpenAI's messages JSON (roles system, user, assistant
   * with tool_calls, tool with tool_call_id), allowed to call {@code tools}. Waits for it.
   */
  public @NonNull ToolReply chat(@NonNull String messagesJson, @NonNull Tools tools, @NonNull GenerateOptions options) {
    Objects.requireNonNull(messagesJson, "messagesJson");
    Objects.requireNonNull(tools, "tools");
    long tp = tools.handle.acquire();
    try {
      int[] prompt;
      long p = handle.acquire();  // keeps modelPtr alive
      try {
        String vars = options.templateVariablesJson();
        byte[] text = Native.applyTemplateJson(modelPtr, messagesJson.getBytes(StandardCharsets.UTF_8), tp, true,
                                               vars == null ? null : vars.getBytes(StandardCharsets.UTF_8));
        prompt = Model.promptTokens(modelPtr, new String(text, StandardCharsets.UTF_8));
      } finally {
        handle.release();
      }
      List<Integer> ids = java.util.Collections.synchronizedList(new ArrayList<>());
      Completion done = start(prompt, options, NO_LISTENER, tools, ids::add).await();
      int[] tokens = new int[ids.size()];
      for (int i = 0; i < tokens.length; i++) tokens[i] = ids.get(i);
      byte[][] parts = Native.toolsParse(tp, tokens);
      List<ToolReply.ToolCall> calls = new ArrayList<>();
      for (int i = 1; i + 2 < parts.length; i += 3) {
        calls.add(new ToolReply.ToolCall(utf8(parts[i]), utf8(parts[i + 1]), utf8(parts[i + 2])));
      }
      return new ToolReply(parts[0] == null ? null : utf8(parts[0]), calls, utf8(parts[parts.length - 1]),
                           done.stats());
    } finally {
      tools.handle.release();
    }
  }

  private static String utf8(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }

  // tools: their grammar holds (kept open for the generation); else options' responseFormat, compiled here.
  private Generation start(int[] promptTokens, GenerateOptions options, StreamListener listener, @Nullable Tools tools,
                           @Nullable IntConsumer onTokenId) {
    Objects.requireNonNull(promptTokens, "promptTokens");
    Objects.requireNonNull(listener, "listener");
    double[] sampling = options.samplingToNative();  // checked on the caller's thread
    byte[][] stops = options.stopsToNative();
    if (handle.isClosed()) throw closed();
    ResponseFormat format = options.responseFormat();
    if (tools != null && format != null) {
      throw new PocketLLMException.InvalidArgument("tools and responseFormat exclude each other");
    }
    // The constraint, compiled on the caller's thread (its errors are the caller's) and freed
    // when the generation ends.
    long grammar;
    Runnable freeGrammar;
    if (tools != null) {
      long tp = tools.handle.acquire();
      grammar = Native.toolsGrammar(tp);
      freeGrammar = tools.handle::release;
    } else if (format != null) {
      long p = handle.acquire();
      try {
        grammar = Native.grammarCreate(modelPtr, format.kind, format.text);
      } finally {
        handle.release();
      }
      long owned = grammar;
      freeGrammar = () -> Native.grammarFree(owned);
    } else {
      grammar = 0;
      freeGrammar = () -> {};
    }
    Generation g = new Generation(this, lifetime.lastId.incrementAndGet());
    Runnable task = () -> {
      try {
        run(g, promptTokens.clone(), sampling, options, stops, grammar, onTokenId, listener);
      } finally {
        freeGrammar.run();
      }
    };
    try {
      worker.execute(task);
    } catch (RejectedExecutionException e) {  // closed meanwhile
      freeGrammar.run();
      throw closed();
    }
    return g;
  }

  private void run(Generation g, int[] prompt, double[] sampling, GenerateOptions options, byte[][] stops,
                   long grammar, @Nullable IntConsumer onTokenId, StreamListener listener) {
    g.started = true;
    long p;
    try {
      p = handle.acquire();
    } catch (PocketLLMException e) {
      g.fail(e, listener);
      return;
    }
    lifetime.runner = Thread.currentThread();
    try {
      StringBuilder text = new StringBuilder();
      TokenSink sink = (token, utf8) -> {
        if (onTokenId != null) onTokenId.accept(token);
        if (utf8.length == 0) return;  // no text yet (mid-character) or none (a control token)
        String piece = new String(utf8, java.nio.charset.StandardCharsets.UTF_8);
        text.append(piece);
        listener.onToken(piece);
      };
      double[] stats = Native.generate(p, g.id, prompt, sampling, options.seedValue(), options.hasSeed(), stops,
                                       grammar, sink);
      g.succeed(new Completion(text.toString(), new GenerationStats(stats)), listener);
    } catch (Throwable e) {  // the engine's error, or the listener's, rethrown through generate
      g.fail(e, listener);
    } finally {
      lifetime.runner = null;
      handle.release();
    }
  }

  /** Stops every generation started so far on this session, from any thread; returns once none runs (a step at most). */
  public void cancel() {
    lifetime.cancel(lifetime.lastId.get(), false);
  }

  void cancel(long id) {
    lifetime.cancel(id, true);
  }

  /** True on the worker thread while one of this session's generations runs (its listeners' thread). */
  boolean onWorker() {
    return Thread.currentThread() == lifetime.runner;
  }

  /** Forgets the conversation (empties the KV cache), after the generations started so far. */
  public void reset() {
    if (onWorker()) {
      throw new PocketLLMException.InvalidArgument("reset() cannot run inside one of the session's generations");
    }
    if (handle.isClosed()) throw closed();
    try {
      worker.submit(() -> {
        long p = handle.acquire();
        try {
          Native.sessionReset(p);
        } finally {
          handle.release();
        }
      }).get();
    } catch (RejectedExecutionException e) {
      throw closed();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new PocketLLMException.Cancelled("interrupted while waiting for reset()");
    } catch (ExecutionException e) {
      throw Generation.unwrap(e.getCause());
    }
  }

  /** Context length in tokens. */
  public int nCtx() {
    long p = handle.acquire();
    try {
      return Native.sessionNCtx(p);
    } finally {
      handle.release();
    }
  }

  public boolean isClosed() {
    return handle.isClosed();
  }

  /** Stops the generations and frees the KV cache (once a running generation has stopped). Idempotent. */
  @Override
  public void close() {
    cleanable.clean();
  }

  // ---- prompts ----------------------------------------------------------------------------

  private int[] chatTokens(List<ChatMessage> messages, GenerateOptions options) {
    long p = handle.acquire();  // keeps modelPtr alive
    try {
      String text = Model.applyChatTemplate(modelPtr, messages, true, options.templateVariablesJson());
      return Model.promptTokens(modelPtr, text);
    } finally {
      handle.release();
    }
  }

  private int[] promptTokens(String prompt) {
    long p = handle.acquire();
    try {
      return Model.promptTokens(modelPtr, prompt);
    } finally {
      handle.release();
    }
  }

  private static PocketLLMException closed() {
    return new PocketLLMException.InvalidArgument("the session is closed");
  }

  private static final StreamListener NO_LISTENER = piece -> {};
}
