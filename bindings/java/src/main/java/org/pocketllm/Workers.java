package org.pocketllm;

import java.lang.ref.Cleaner;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads the binding owns: each session's worker (its generations run there, one at a
 * time, and call the listeners there), the pool that delivers Flow signals, and the Cleaner
 * that frees what was never closed. All daemons, so they never keep an app's JVM alive.
 */
final class Workers {
  private Workers() {}

  static final Cleaner CLEANER = Cleaner.create(daemons("pocketllm-cleaner"));
  static final ExecutorService DELIVERY = Executors.newCachedThreadPool(daemons("pocketllm-deliver"));

  /** One thread, started on the first task and ended after 5 s without one. */
  static ThreadPoolExecutor sessionWorker() {
    ThreadPoolExecutor e = new ThreadPoolExecutor(1, 1, 5, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                                                  daemons("pocketllm-session"));
    e.allowCoreThreadTimeOut(true);
    return e;
  }

  private static ThreadFactory daemons(String name) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /** A listener's exception after the generation's outcome is settled: nowhere else to go. */
  static void uncaught(Throwable t) {
    Thread self = Thread.currentThread();
    self.getUncaughtExceptionHandler().uncaughtException(self, t);
  }
}
