// The C API's statuses arrive as PocketLLMError with the engine's message; bad input never
// crashes, and what failed stays usable.
import Foundation
import PocketLLM
import Testing

@Suite("Errors", .serialized, .timeLimit(.minutes(2)))
struct ErrorTests {
    private func temporaryFile(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pllm-swift-\(UUID().uuidString).gguf").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func missingFile() async {
        let e = await pocketLLMError { _ = try await Model(path: "/nonexistent/absent.gguf") }
        #expect(e?.code == .io && e?.message.contains("absent.gguf") == true, "\(String(describing: e))")
    }

    @Test(arguments: [[UInt8](), Array("not a gguf file at all".utf8), Array("GGUF\u{3}\0\0\0trunc".utf8)])
    func corruptFile(bytes: [UInt8]) async throws {
        let path = try temporaryFile(bytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let e = await pocketLLMError { _ = try await Model(path: path) }
        #expect(e?.code == .badFormat && e?.message.isEmpty == false, "\(String(describing: e))")
    }

    @Test(.enabled(if: Fixtures.hasModel)) func truncatedModel() async throws {
        let head = try FileHandle(forReadingFrom: URL(fileURLWithPath: Fixtures.modelPath)).readData(ofLength: 1_000_000)
        let path = try temporaryFile([UInt8](head))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let e = await pocketLLMError { _ = try await Model(path: path) }
        #expect(e?.code == .badFormat && e?.message.contains("past the end") == true, "\(String(describing: e))")
    }

    @Test(.enabled(if: Fixtures.hasModel)) func useAfterClose() async throws {
        let model = try await Model(path: Fixtures.modelPath)
        let session = try await model.makeSession(SessionParams(threads: Fixtures.threads))
        await model.close()
        let e = await pocketLLMError { _ = try await model.makeSession() }
        #expect(e?.code == .invalidArgument && e?.message == "the model is closed")
        // The session made before keeps the weights.
        #expect(try await session.respond(to: Fixtures.capital).contains("Paris"))

        session.close()
        session.close()  // idempotent
        let r = await pocketLLMError { _ = try await session.respond(to: Fixtures.capital) }
        #expect(r?.message == "the session is closed")
        let s = await pocketLLMError { for try await _ in session.stream(Fixtures.capital) {} }
        #expect(s?.message == "the session is closed")
        let reset = await pocketLLMError { try await session.reset() }
        #expect(reset?.code == .invalidArgument)
    }

    @Test(.enabled(if: Fixtures.hasModel)) func badOptionsAndInput() async throws {
        let session = try await Fixtures.session()
        let temp = await pocketLLMError {
            _ = try await session.respond(to: Fixtures.capital, options: GenerationOptions(temperature: -1))
        }
        #expect(temp?.code == .invalidArgument && temp?.message.contains("sampling parameter out of range") == true)
        let topP = await pocketLLMError {
            _ = try await session.respond(to: Fixtures.capital, options: GenerationOptions(topP: 0))
        }
        #expect(topP?.code == .invalidArgument)
        let big = await pocketLLMError {
            _ = try await session.respond(to: Fixtures.capital, options: GenerationOptions(maxTokens: Int.max))
        }
        #expect(big?.code == .invalidArgument && big?.message.contains("maxTokens") == true)
        let emptyStop = await pocketLLMError {
            _ = try await session.respond(to: Fixtures.capital, options: GenerationOptions(stop: [""]))
        }
        #expect(emptyStop?.code == .invalidArgument && emptyStop?.message.contains("empty stop string") == true)
        let nul = await pocketLLMError { _ = try await session.respond(to: "a\0b") }
        #expect(nul?.code == .invalidArgument && nul?.message.contains("NUL") == true)
        let empty = await pocketLLMError { _ = try await session.response(to: .tokens([])) }
        #expect(empty?.code == .invalidArgument && empty?.message.contains("empty prompt") == true)
        let badToken = await pocketLLMError { _ = try await session.response(to: .tokens([-5])) }
        #expect(badToken?.code == .invalidArgument, "\(String(describing: badToken))")
        // Still answers.
        #expect(try await session.respond(to: Fixtures.capital).contains("Paris"))
    }

    @Test(.enabled(if: Fixtures.hasModel)) func promptLongerThanTheContext() async throws {
        let session = try await Fixtures.session(SessionParams(contextLength: 64))
        let e = await pocketLLMError { _ = try await session.respond(to: String(repeating: "hello ", count: 100)) }
        #expect(e?.code == .outOfRange && e?.message.contains("does not fit the context") == true)
        #expect(try await session.respond(to: Fixtures.capital).contains("Paris"))
    }

    @Test(.enabled(if: Fixtures.hasModel)) func badSessionParams() async throws {
        let model = try await Fixtures.model()
        let ctx = await pocketLLMError { _ = try await model.makeSession(SessionParams(contextLength: -5)) }
        #expect(ctx?.code == .invalidArgument && ctx?.message.contains("context size") == true, "\(String(describing: ctx))")
        let threads = await pocketLLMError { _ = try await model.makeSession(SessionParams(threads: 1 << 40)) }
        #expect(threads?.code == .invalidArgument && threads?.message.contains("threads") == true)
    }
}
