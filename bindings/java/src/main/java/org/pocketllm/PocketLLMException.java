package org.pocketllm;

import java.nio.charset.StandardCharsets;

/**
 * A failed call into the engine: one subclass per pllm_status, carrying the engine's message
 * (pllm_last_error). Unchecked, so Kotlin and lambdas need no throws clauses.
 */
public class PocketLLMException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int status;

  PocketLLMException(int status, @NonNull String message) {
    super(message);
    this.status = status;
  }

  /** The pllm_status code (1 invalid argument ... 8 internal). */
  public int status() {
    return status;
  }

  /** PLLM_ERR_INVALID_ARGUMENT: a bad value, or a closed model or session. */
  public static final class InvalidArgument extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public InvalidArgument(@NonNull String message) {
      super(1, message);
    }
  }

  /** PLLM_ERR_IO: a file that cannot be opened or read. */
  public static final class Io extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public Io(@NonNull String message) {
      super(2, message);
    }
  }

  /** PLLM_ERR_BAD_FORMAT: a file that is not a valid GGUF model. */
  public static final class BadFormat extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public BadFormat(@NonNull String message) {
      super(3, message);
    }
  }

  /** PLLM_ERR_UNSUPPORTED: valid, but not something this engine does. */
  public static final class Unsupported extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public Unsupported(@NonNull String message) {
      super(4, message);
    }
  }

  /** PLLM_ERR_OUT_OF_RANGE: e.g. a prompt that does not fit the context. */
  public static final class OutOfRange extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public OutOfRange(@NonNull String message) {
      super(5, message);
    }
  }

  /** PLLM_ERR_OUT_OF_MEMORY. */
  public static final class OutOfMemory extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public OutOfMemory(@NonNull String message) {
      super(6, message);
    }
  }

  /** PLLM_ERR_CANCELLED: a load aborted, or a blocking call whose thread was interrupted. */
  public static final class Cancelled extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public Cancelled(@NonNull String message) {
      super(7, message);
    }
  }

  /** PLLM_ERR_INTERNAL: a bug; the message says where. */
  public static final class Internal extends PocketLLMException {
    private static final long serialVersionUID = 1L;

    public Internal(@NonNull String message) {
      super(8, message);
    }
  }

  /** The exception for a status (called by the JNI library with the message as UTF-8). */
  static PocketLLMException of(int status, byte[] utf8Message) {
    String message = new String(utf8Message, StandardCharsets.UTF_8);
    switch (status) {
      case 1: return new InvalidArgument(message);
      case 2: return new Io(message);
      case 3: return new BadFormat(message);
      case 4: return new Unsupported(message);
      case 5: return new OutOfRange(message);
      case 6: return new OutOfMemory(message);
      case 7: return new Cancelled(message);
      case 8: return new Internal(message);
      default: return new PocketLLMException(status, message);
    }
  }
}
