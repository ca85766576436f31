package org.pocketllm;

/**
 * Where the native generation loop hands each piece of text: {@code utf8} is complete UTF-8 (the
 * C API never splits a character between pieces), so it decodes on its own. Called on the
 * session's worker thread; an exception thrown here stops the generation and is rethrown from it.
 */
interface TokenSink {
  void onPiece(int token, byte[] utf8);
}
