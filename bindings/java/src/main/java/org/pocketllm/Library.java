package org.pocketllm;

/**
 * Loads libpocketllm_jni once: from the path in the system property {@code pocketllm.library}
 * when set (tests, desktop apps shipping the .so beside their jar), else by name through
 * System.loadLibrary (java.library.path; on Android the APK's lib/ABI directory).
 */
final class Library {
  private Library() {}

  private static boolean loaded;

  static synchronized void load() {
    if (loaded) return;
    String path = System.getProperty("pocketllm.library");
    if (path != null && !path.isEmpty()) {
      System.load(path);
    } else {
      System.loadLibrary("pocketllm_jni");
    }
    loaded = true;
  }
}
