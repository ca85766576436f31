// What the tests share: the real model (SmolLM2-135M-Instruct Q4_1, from POCKETLLM_MODELS, as
// the Python suites find it), the tiny model scripts/test_swift.sh writes, and the prompts.
import Foundation
import PocketLLM
import Testing

enum Fixtures {
    static let modelName = "SmolLM2-135M-Instruct.Q4_1.gguf"

    static var modelPath: String {
        let env = ProcessInfo.processInfo.environment["POCKETLLM_MODELS"]
        // bindings/swift/Tests/PocketLLMTests/Fixtures.swift -> the repository's models/
        let base = env ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../../models").standardizedFileURL.path
        return base + "/" + modelName
    }
    static var hasModel: Bool { FileManager.default.fileExists(atPath: modelPath) }

    /// A tiny random-weight GGUF (tests/py/tiny_models.py), for the load/close cycles.
    static var tinyModelPath: String? { ProcessInfo.processInfo.environment["POCKETLLM_SWIFT_TINY_MODEL"] }

    /// Threads per session (POCKETLLM_TEST_THREADS, default 1: CI has two cores).
    static var threads: Int { Int(ProcessInfo.processInfo.environment["POCKETLLM_TEST_THREADS"] ?? "") ?? 1 }

    static let capital = "What is the capital of France?"
    static let story = [Message.user("Write a short story about a robot who learns to paint.")]
    static let long = [Message.user("Write a very long story about a dragon and a knight.")]
    static let manyTokens = 400  // far more than a cancelled generation gets to

    /// One load of the real model for the whole run (a Task's value is Sendable and shared).
    private static let shared = Task { try await Model(path: modelPath) }
    static func model() async throws -> Model { try await shared.value }

    static func session(_ params: SessionParams = SessionParams()) async throws -> Session {
        var p = params
        if p.threads == 0 { p.threads = threads }
        return try await model().makeSession(p)
    }

    /// Polls `condition` every few milliseconds; a generous hang guard, not a timing check.
    static func waitUntil(_ what: Comment, _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("gave up waiting: \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

/// The thrown error as a PocketLLMError (the test fails if it is anything else).
func pocketLLMError(_ body: () async throws -> Void) async -> PocketLLMError? {
    do {
        try await body()
        Issue.record("expected a PocketLLMError, nothing was thrown")
    } catch let e as PocketLLMError {
        return e
    } catch {
        Issue.record("expected a PocketLLMError, got \(error)")
    }
    return nil
}
