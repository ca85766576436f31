package org.pocketllm;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * What a reply must follow (pllm_grammar_create): one JSON object, a JSON Schema, or a GBNF
 * grammar. A constraint the engine cannot enforce (a schema keyword it does not support, a bad
 * grammar) is a PocketLLMException.InvalidArgument naming it, thrown by the call that uses it.
 */
public final class ResponseFormat {
  // pllm_grammar_kind
  static final int GBNF = 0;
  static final int JSON_SCHEMA = 1;

  final int kind;
  final byte[] text;

  private ResponseFormat(int kind, String text) {
    this.kind = kind;
    this.text = text.getBytes(StandardCharsets.UTF_8);
  }

  /** One JSON object (OpenAI's JSON mode). */
  public static @NonNull ResponseFormat jsonObject() {
    return new ResponseFormat(JSON_SCHEMA, "{\"type\": \"object\"}");
  }

  /** A JSON Schema (draft 2020-12 subset) as JSON text. */
  public static @NonNull ResponseFormat jsonSchema(@NonNull String schema) {
    return new ResponseFormat(JSON_SCHEMA, Objects.requireNonNull(schema, "schema"));
  }

  /** A llama.cpp GBNF grammar (start rule root). */
  public static @NonNull ResponseFormat grammar(@NonNull String gbnf) {
    return new ResponseFormat(GBNF, Objects.requireNonNull(gbnf, "gbnf"));
  }
}
