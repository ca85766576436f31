package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Structured output (responseFormat) and tools over pllm_grammar_* / pllm_tools_*, on the real model. */
class StructuredTest {
  static Model model;
  static final String WEATHER = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
      + " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 30},"
      + " \"unit\": {\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\", \"unit\"],"
      + " \"additionalProperties\": false}}}]";
  static final String ASK = "[{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}]";
  // The arguments the schema allows, as the grammar writes them (no other keys, a unit of the enum).
  static final Pattern ARGS = Pattern.compile(
      "\\{\\s?\"city\"\\s?:\\s?\"[^\"]{0,30}\"\\s?,\\s?\"unit\"\\s?:\\s?\"(celsius|fahrenheit)\"\\s?}");

  @BeforeAll
  static void load() {
    model = TestModels.loadSmollm2();
  }

  @AfterAll
  static void close() {
    if (model != null) model.close();
  }

  @Test
  void grammarAndSchemaHold() {
    try (Session s = model.newSession()) {
      String yes = s.chat(List.of(ChatMessage.user("Yes or no?")),
                          GenerateOptions.defaults().maxTokens(8).responseFormat(ResponseFormat.grammar("root ::= \"yes\" | \"no\"")))
                       .text();
      assertTrue(yes.equals("yes") || yes.equals("no"), yes);
      String schema = "{\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\", \"minimum\": 0,"
          + " \"maximum\": 120}}, \"required\": [\"age\"], \"additionalProperties\": false}";
      for (long seed = 1; seed <= 3; seed++) {
        Completion c = s.chat(List.of(ChatMessage.user("How old is the person? Reply as JSON.")),
                              GenerateOptions.defaults().maxTokens(40).temperature(1).seed(seed)
                                  .responseFormat(ResponseFormat.jsonSchema(schema)));
        assertEquals(StopReason.EOG, c.stats().stopReason());
        assertTrue(c.text().matches("\\{\\s*\"age\"\\s*:\\s*(\\d{1,3}(\\.0)?)\\s*}"), c.text());
      }
      assertThrows(PocketLLMException.InvalidArgument.class, () -> s.chat(List.of(ChatMessage.user("x")),
          GenerateOptions.defaults().responseFormat(ResponseFormat.jsonSchema("{\"type\": \"string\", \"format\": \"hostname\"}"))));
    }
  }

  @Test
  void requiredToolCallAndASecondTurn() {
    try (Session s = model.newSession(); Tools tools = model.tools(WEATHER, "\"required\"", false)) {
      ToolReply first = s.chat(ASK, tools, GenerateOptions.defaults().maxTokens(120));
      assertEquals(StopReason.EOG, first.stats().stopReason());
      assertEquals(1, first.toolCalls().size());
      ToolReply.ToolCall call = first.toolCalls().get(0);
      assertEquals("get_weather", call.name());
      assertTrue(ARGS.matcher(call.arguments()).matches(), call.arguments());
      assertNull(first.content());
      assertTrue(first.json().contains("\"tool_calls\""), first.json());
      // The next turn: the call (OpenAI's fields, as json() gives them) and the tool's result.
      String assistant = first.json().substring(0, first.json().length() - 1) + ", \"role\": \"assistant\"}";
      String history = ASK.substring(0, ASK.length() - 1) + ", " + assistant + ", {\"role\": \"tool\", \"tool_call_id\": \""
          + call.id() + "\", \"content\": \"21 C, clear\"}]";
      try (Tools none = model.tools(WEATHER, "\"none\"", true)) {
        ToolReply second = s.chat(history, none, GenerateOptions.defaults().maxTokens(24));
        assertTrue(second.toolCalls().isEmpty());
        assertTrue(second.stats().nPrompt() > first.stats().nPrompt(), "the call and its result are in the prompt");
      }
    }
  }

  @Test
  void badToolsAndHistoryThrow() {
    assertThrows(PocketLLMException.InvalidArgument.class,
                 () -> model.tools("[{\"type\": \"function\", \"function\": {\"name\": \"bad name\"}}]", null, true));
    assertThrows(PocketLLMException.InvalidArgument.class, () -> model.tools(WEATHER, "\"sometimes\"", true));
    try (Session s = model.newSession(); Tools tools = model.tools(WEATHER, null, true)) {
      assertThrows(PocketLLMException.InvalidArgument.class, () -> s.chat(
          "[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"tool\", \"tool_call_id\": \"x\", \"content\": \"1\"}]",
          tools, GenerateOptions.defaults()));
      assertThrows(PocketLLMException.InvalidArgument.class,
                   () -> s.chat(ASK, tools, GenerateOptions.defaults().responseFormat(ResponseFormat.jsonObject())));
    }
  }
}
