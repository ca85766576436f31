package org.pocketllm.sample;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.Executor;
import org.pocketllm.ChatMessage;
import org.pocketllm.Completion;
import org.pocketllm.GenerateOptions;
import org.pocketllm.Generation;
import org.pocketllm.Model;
import org.pocketllm.ModelParams;
import org.pocketllm.PocketLLM;
import org.pocketllm.Session;
import org.pocketllm.SessionParams;
import org.pocketllm.StopReason;
import org.pocketllm.StreamListener;

/**
 * The model side of a minimal chat screen: the conversation, a reply streaming into it, a Stop
 * button. Plain Java over the binding so it compiles anywhere (scripts/test_java.sh compiles
 * it); on Android, extend androidx.lifecycle.ViewModel, pass {@code ContextCompat.getMainExecutor(context)}
 * as uiThread and call close() from onCleared().
 *
 * <p>Threading: the binding streams on its own worker thread; every callback to the screen is
 * re-posted to uiThread, so the screen only ever sees its own thread. Nothing here blocks the UI:
 * loading is the one slow call, so do it off the main thread (e.g. in a coroutine on Dispatchers.IO).
 */
public final class ChatViewModel implements AutoCloseable {
  /** What the screen shows; called on the UI thread. */
  public interface View {
    void showMessages(List<ChatMessage> messages, String replySoFar, boolean generating);

    void showError(String message);
  }

  private final Model model;
  private final Session session;
  private final Executor uiThread;
  private final View view;
  private final List<ChatMessage> messages = new ArrayList<>();  // UI thread only
  private final StringBuilder reply = new StringBuilder();        // UI thread only
  private Generation generation;                                  // UI thread only

  /** Loads the model (slow: call off the main thread). */
  public ChatViewModel(String modelPath, Executor uiThread, View view) {
    this.model = PocketLLM.load(modelPath, new ModelParams().session(new SessionParams().nCtx(2048)));
    this.session = model.newSession();
    this.uiThread = uiThread;
    this.view = view;
    messages.add(ChatMessage.system("You are a helpful assistant. Answer briefly."));
  }

  /** The Send button. */
  public void send(String text) {
    if (generation != null && !generation.isDone()) return;  // one reply at a time
    messages.add(ChatMessage.user(text));
    reply.setLength(0);
    view.showMessages(Collections.unmodifiableList(messages), "", true);
    generation = session.stream(new ArrayList<>(messages), GenerateOptions.defaults().maxTokens(512),
                                new StreamListener() {
      @Override
      public void onToken(String piece) {  // the binding's worker thread
        uiThread.execute(() -> {
          reply.append(piece);
          view.showMessages(Collections.unmodifiableList(messages), reply.toString(), true);
        });
      }

      @Override
      public void onDone(Completion completion) {
        uiThread.execute(() -> {
          // A stopped reply is kept too: the next turn continues from what the user saw.
          messages.add(ChatMessage.assistant(completion.text()));
          view.showMessages(Collections.unmodifiableList(messages), "", false);
          if (completion.stats().stopReason() == StopReason.CONTEXT_FULL) view.showError("The conversation is full.");
        });
      }

      @Override
      public void onError(Throwable error) {
        uiThread.execute(() -> {
          view.showMessages(Collections.unmodifiableList(messages), "", false);
          view.showError(String.valueOf(error.getMessage()));
        });
      }
    });
  }

  /** The Stop button: returns within a step of the engine, prefill included. */
  public void stop() {
    if (generation != null) generation.cancel();
  }

  /** The New chat button. */
  public void clear() {
    stop();
    messages.subList(1, messages.size()).clear();
    session.reset();
    view.showMessages(Collections.unmodifiableList(messages), "", false);
  }

  /** onCleared(): stops the reply and frees the KV cache and the weights. */
  @Override
  public void close() {
    session.close();
    model.close();
  }
}
