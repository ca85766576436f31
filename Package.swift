// swift-tools-version: 6.0
// PocketLLM for Swift: the PocketLLM module (bindings/swift/Sources/PocketLLM) over the C API in
// include/pocketllm/pocketllm.h. Building, linking and the iOS XCFramework: bindings/swift/README.md.
import PackageDescription

// The C library. On Linux: libpocketllm.so from the CMake build (PLLM_BUILD_SHARED=ON), found
// through its pkg-config file (PKG_CONFIG_PATH=<build>/pkgconfig, or an installed pocketllm.pc).
// On Apple platforms: an XCFramework made on a Mac with CMake and xcodebuild (not built by this
// repository's scripts; see the README), whose headers carry the same CPocketLLM module map.
#if os(Linux)
let cLibrary: Target = .systemLibrary(
    name: "CPocketLLM", path: "bindings/swift/Sources/CPocketLLM", pkgConfig: "pocketllm")
let cLinkerSettings: [LinkerSetting] = []
#else
let cLibrary: Target = .binaryTarget(name: "CPocketLLM", path: "bindings/swift/CPocketLLM.xcframework")
// The engine is C++ behind its C API: a static archive needs the C++ runtime.
let cLinkerSettings: [LinkerSetting] = [.linkedLibrary("c++")]
#endif

let package = Package(
    name: "PocketLLM",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "PocketLLM", targets: ["PocketLLM"])
    ],
    targets: [
        cLibrary,
        .target(
            name: "PocketLLM", dependencies: ["CPocketLLM"], path: "bindings/swift/Sources/PocketLLM",
            linkerSettings: cLinkerSettings),
        // The SwiftUI sample's model object (docs/ios/ChatModel.swift), compiled everywhere so
        // that it stays in step with the package; its view compiles where SwiftUI exists.
        .target(
            name: "ChatSample", dependencies: ["PocketLLM"], path: "docs/ios",
            sources: ["ChatModel.swift"]),
        .testTarget(
            name: "PocketLLMTests", dependencies: ["PocketLLM", "ChatSample"],
            path: "bindings/swift/Tests/PocketLLMTests"),
    ],
    swiftLanguageModes: [.v6]
)
