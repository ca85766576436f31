// The Android library module of the Java binding: the Java sources of bindings/java/src/main/java
// and libpocketllm_jni.so built by the NDK through CMakeLists.txt here (the repository's CMake
// with PLLM_BUILD_JNI) for arm64-v8a and x86_64. NOT BUILT OR TESTED in this repository's CI,
// which has no Android SDK / NDK: see bindings/java/README.md for what is and what is not checked.
//
// Needs (gradle.properties or -P):
//   pocketllm.pcre2SourceDir     a PCRE2 source tree (e.g. pcre2-10.42): the NDK has no PCRE2, so
//                                it is built as a static library into the .so
//   pocketllm.nlohmannJsonDir    the directory holding nlohmann_jsonConfig.cmake (header-only JSON
//                                library, e.g. <json-3.11>/build or an install's share/cmake/nlohmann_json)
plugins {
    id("com.android.library")
}

android {
    namespace = "org.pocketllm"
    compileSdk = 35
    // java.lang.ref.Cleaner (the safety net that frees unclosed models and sessions) is API 33.
    defaultConfig {
        minSdk = 33
        consumerProguardFiles("consumer-rules.pro")
        ndk {
            abiFilters += listOf("arm64-v8a", "x86_64")
        }
        externalNativeBuild {
            cmake {
                arguments += listOf(
                    "-DPLLM_BUILD_JNI=ON",
                    "-DPLLM_BUILD_TESTS=OFF",
                    "-DPLLM_BUILD_TOOLS=OFF",
                    "-DPLLM_VULKAN=OFF",
                    // libc++ linked into the .so: nothing to ship beside it, no clash with the app's
                    "-DANDROID_STL=c++_static",
                    // 16 KiB pages (Android 15+ devices); the JNI CMake also links with max-page-size=16384
                    "-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON",
                    "-DPLLM_PCRE2_SOURCE_DIR=" + property("pocketllm.pcre2SourceDir"),
                    "-Dnlohmann_json_DIR=" + property("pocketllm.nlohmannJsonDir"),
                )
                targets += listOf("pocketllm_jni")
            }
        }
    }
    externalNativeBuild {
        cmake {
            path = file("CMakeLists.txt")
            version = "3.25.1"  // FindJNI's Android support needs >= 3.24
        }
    }
    buildTypes {
        release {
            externalNativeBuild { cmake { arguments += "-DCMAKE_BUILD_TYPE=Release" } }
        }
    }
    sourceSets {
        getByName("main") {
            java.srcDirs("../src/main/java")
        }
    }
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    packaging {
        // Keep the .so uncompressed and page-aligned in the APK so it is mapped in place.
        jniLibs { useLegacyPackaging = false }
    }
}
