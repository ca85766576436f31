package org.pocketllm;

import java.util.function.LongConsumer;

/**
 * A C handle shared by the threads that use it and freed exactly once: when it has been closed
 * and the last user has let go. Users bracket each native call with acquire/release, so close()
 * from one thread never frees what another thread's call is using. Also the Cleaner's action
 * (run): it must not reference the Java object it guards, or that object would never be collected.
 */
final class NativeHandle implements Runnable {
  private final String what;
  private final LongConsumer free;
  private long ptr;
  private int users;
  private boolean closed;

  NativeHandle(String what, long ptr, LongConsumer free) {
    this.what = what;
    this.ptr = ptr;
    this.free = free;
  }

  /** The pointer, held until release(); PocketLLMException.InvalidArgument once closed. */
  synchronized long acquire() {
    if (closed) throw new PocketLLMException.InvalidArgument("the " + what + " is closed");
    users++;
    return ptr;
  }

  /** The pointer held until release(), or 0 (nothing held) once closed. */
  synchronized long tryAcquire() {
    if (closed) return 0;
    users++;
    return ptr;
  }

  void release() {
    long p = 0;
    synchronized (this) {
      if (--users == 0 && closed) {
        p = ptr;
        ptr = 0;
      }
    }
    if (p != 0) free.accept(p);
  }

  synchronized boolean isClosed() {
    return closed;
  }

  /** Idempotent; frees now, or when the last user releases. */
  void close() {
    long p = 0;
    synchronized (this) {
      if (closed) return;
      closed = true;
      if (users == 0) {
        p = ptr;
        ptr = 0;
      }
    }
    if (p != 0) free.accept(p);
  }

  @Override
  public void run() {
    close();
  }
}
