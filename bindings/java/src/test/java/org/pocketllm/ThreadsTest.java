package org.pocketllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Four sessions of one model on four threads give each the answer it gives alone. */
@Tag("numerics")  // mostly the real model's arithmetic: left out under ASan (scripts/test_java.sh)
class ThreadsTest {
  static final String[] COUNTRIES = {"France", "Germany", "Italy", "Spain"};

  @Test
  void fourSessionsOnFourThreads() throws Exception {
    GenerateOptions greedy = GenerateOptions.defaults().temperature(0).maxTokens(24);
    try (Model model = TestModels.loadSmollm2()) {
      List<String> alone = new ArrayList<>();
      try (Session s = model.newSession()) {
        for (String c : COUNTRIES) {
          s.reset();
          alone.add(s.chat(question(c), greedy).text());
        }
      }
      assertTrue(alone.get(0).contains("Paris") && alone.get(1).contains("Berlin"), alone.toString());
      ExecutorService pool = Executors.newFixedThreadPool(4);
      try {
        List<Future<String>> together = new ArrayList<>();
        for (String c : COUNTRIES) {
          Callable<String> ask = () -> {
            try (Session s = model.newSession()) {
              return s.chat(question(c), greedy).text();
            }
          };
          together.add(pool.submit(ask));
        }
        for (int i = 0; i < COUNTRIES.length; i++) assertEquals(alone.get(i), together.get(i).get());
      } finally {
        pool.shutdown();
      }
    }
  }

  static List<ChatMessage> question(String country) {
    return List.of(ChatMessage.user("What is the capital of " + country + "?"));
  }
}
