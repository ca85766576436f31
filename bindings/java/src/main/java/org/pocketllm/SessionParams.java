package org.pocketllm;

import java.nio.charset.StandardCharsets;

/**
 * How a session runs (pllm_session_params): context length, threads, KV cache, prefill batch,
 * activation mode and backend. Fluent setters, e.g. {@code new SessionParams().nCtx(2048).threads(2)}.
 * Zero means the engine's default wherever the C API says so.
 */
public final class SessionParams {
  /** How the KV cache stores keys and values (pllm_kv_type). */
  public enum KvType { F16, F32, Q8, Q4 }

  /** Which hardware runs the forward passes (pllm_backend). */
  public enum Backend { CPU, AUTO, VULKAN }

  private int nCtx;
  private int threads;
  private KvType kvType = KvType.F16;
  private int kvWindow;
  private int kvSinks = 4;
  private int batch;
  private @Nullable String activations;
  private Backend backend = Backend.CPU;

  public SessionParams() {}

  public SessionParams(@NonNull SessionParams other) {
    nCtx = other.nCtx;
    threads = other.threads;
    kvType = other.kvType;
    kvWindow = other.kvWindow;
    kvSinks = other.kvSinks;
    batch = other.batch;
    activations = other.activations;
    backend = other.backend;
  }

  /** Context length in tokens; 0: min(the model's training context, 4096). */
  public @NonNull SessionParams nCtx(int nCtx) {
    this.nCtx = nCtx;
    return this;
  }

  /** Threads; 0: one per performance core. */
  public @NonNull SessionParams threads(int threads) {
    this.threads = threads;
    return this;
  }

  public @NonNull SessionParams kvType(@NonNull KvType kvType) {
    this.kvType = kvType;
    return this;
  }

  /** 0: no window; N: keep the first kvSinks positions and the most recent ones (a sliding context). */
  public @NonNull SessionParams kvWindow(int kvWindow) {
    this.kvWindow = kvWindow;
    return this;
  }

  public @NonNull SessionParams kvSinks(int kvSinks) {
    this.kvSinks = kvSinks;
    return this;
  }

  /** Most prompt tokens per forward pass in prefill; 0: 64. */
  public @NonNull SessionParams batch(int batch) {
    this.batch = batch;
    return this;
  }

  /** The activation mode's word ("int16", "exact", "int8", "f16", "static"); null: the default. */
  public @NonNull SessionParams activations(@Nullable String activations) {
    this.activations = activations;
    return this;
  }

  public @NonNull SessionParams backend(@NonNull Backend backend) {
    this.backend = backend;
    return this;
  }

  public int nCtx() {
    return nCtx;
  }

  public int threads() {
    return threads;
  }

  public @Nullable String activations() {
    return activations;
  }

  /** The pllm_activations value of the word (the engine parses it: one list of words everywhere). */
  int activationsValue() {
    return activations == null ? 0 : Native.activationsParse(activations.getBytes(StandardCharsets.UTF_8));
  }

  /** The int[] the JNI library's sessionCreate reads (jni_session.cpp, SessionField). */
  int[] toNative() {
    return new int[] {nCtx, threads, kvType.ordinal(), kvWindow, kvSinks, batch, activationsValue(), backend.ordinal()};
  }
}
