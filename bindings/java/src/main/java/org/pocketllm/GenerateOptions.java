package org.pocketllm;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * A generation's options. Sampling is the model's own (pllm_model_sampling_params: greedy unless
 * its file says otherwise) with the fields set here replaced, as in the Python package.
 */
public final class GenerateOptions {
  private int maxTokens = 256;
  private @Nullable Double temperature;
  private @Nullable Integer topK;
  private @Nullable Double topP;
  private @Nullable Double minP;
  private @Nullable Double repeatPenalty;
  private @Nullable Long seed;
  private List<String> stop = Collections.emptyList();
  private @Nullable String templateVariablesJson;
  private @Nullable ResponseFormat responseFormat;

  public static @NonNull GenerateOptions defaults() {
    return new GenerateOptions();
  }

  /** Tokens to generate at most (default 256). */
  public @NonNull GenerateOptions maxTokens(int maxTokens) {
    this.maxTokens = maxTokens;
    return this;
  }

  /** 0: greedy. */
  public @NonNull GenerateOptions temperature(double temperature) {
    this.temperature = temperature;
    return this;
  }

  public @NonNull GenerateOptions topK(int topK) {
    this.topK = topK;
    return this;
  }

  public @NonNull GenerateOptions topP(double topP) {
    this.topP = topP;
    return this;
  }

  public @NonNull GenerateOptions minP(double minP) {
    this.minP = minP;
    return this;
  }

  public @NonNull GenerateOptions repeatPenalty(double repeatPenalty) {
    this.repeatPenalty = repeatPenalty;
    return this;
  }

  /** The sampler's seed (unset: the engine's 0). Any long; read as unsigned 64 bits. */
  public @NonNull GenerateOptions seed(long seed) {
    this.seed = seed;
    return this;
  }

  /** Generation stops when the text ends with one of these (which is not emitted). */
  public @NonNull GenerateOptions stop(@NonNull List<String> stop) {
    for (String s : stop) {
      if (s == null || s.isEmpty()) throw new PocketLLMException.InvalidArgument("stop strings must be non-empty");
    }
    this.stop = Collections.unmodifiableList(new ArrayList<>(stop));
    return this;
  }

  /**
   * Variables the chat template reads besides the conversation, as a JSON object, e.g.
   * {@code {"enable_thinking": false}} (Qwen3); null: none. Only chat() reads it.
   */
  public @NonNull GenerateOptions responseFormat(@Nullable ResponseFormat format) {
    this.responseFormat = format;
    return this;
  }

  /** What the reply must follow (JSON, a schema, a grammar); null: free text. */
  public @Nullable ResponseFormat responseFormat() {
    return responseFormat;
  }

  public @NonNull GenerateOptions templateVariablesJson(@Nullable String json) {
    this.templateVariablesJson = json;
    return this;
  }

  public int maxTokens() {
    return maxTokens;
  }

  @Nullable String templateVariablesJson() {
    return templateVariablesJson;
  }

  /** The double[] the JNI library's generate reads (jni_session.cpp, SamplingField); NaN keeps the model's. */
  double[] samplingToNative() {
    if (maxTokens < 0) throw new PocketLLMException.InvalidArgument("maxTokens must be >= 0, not " + maxTokens);
    return new double[] {maxTokens, orNaN(temperature), topK == null ? Double.NaN : topK, orNaN(topP), orNaN(minP),
                         orNaN(repeatPenalty)};
  }

  boolean hasSeed() {
    return seed != null;
  }

  long seedValue() {
    return seed == null ? 0 : seed;
  }

  byte[][] stopsToNative() {
    byte[][] out = new byte[stop.size()][];
    for (int i = 0; i < out.length; i++) out[i] = stop.get(i).getBytes(StandardCharsets.UTF_8);
    return out;
  }

  private static double orNaN(@Nullable Double d) {
    return d == null ? Double.NaN : d;
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof GenerateOptions)) return false;
    GenerateOptions g = (GenerateOptions) o;
    return maxTokens == g.maxTokens && Objects.equals(temperature, g.temperature) && Objects.equals(topK, g.topK)
        && Objects.equals(topP, g.topP) && Objects.equals(minP, g.minP) && Objects.equals(repeatPenalty, g.repeatPenalty)
        && Objects.equals(seed, g.seed) && stop.equals(g.stop)
        && Objects.equals(templateVariablesJson, g.templateVariablesJson);
  }

  @Override
  public int hashCode() {
    return Objects.hash(maxTokens, temperature, topK, topP, minP, repeatPenalty, seed, stop, templateVariablesJson);
  }
}
