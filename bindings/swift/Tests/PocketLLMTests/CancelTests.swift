// Cancellation: during the prefill and during decoding, from another task, by the calling
// task's cancellation and by leaving a stream's loop; the session answers normally afterwards.
import ChatSample
import PocketLLM
import Testing

@Suite("Cancellation", .serialized, .enabled(if: Fixtures.hasModel, "the real model is missing (scripts/fetch_model.sh)"),
       .timeLimit(.minutes(2)))
struct CancelTests {
    @Test func cancelFromAnotherTaskDuringThePrefill() async throws {
        let session = try await Fixtures.session()
        // About 1,500 prompt tokens: a prefill of seconds on one thread.
        let prompt = Prompt.messages([.user(String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 150))])
        let reply = Task { try await session.response(to: prompt, options: GenerationOptions(maxTokens: 8)) }
        try await Fixtures.waitUntil("the generation to start") { session.isResponding }
        try await Task.sleep(for: .milliseconds(20))  // into the prefill (a cancel before it is another case)
        await Task.detached { session.cancel() }.value
        let response = try await reply.value
        #expect(response.stats.stopReason == .cancelled)
        #expect(response.stats.generatedTokens == 0 && response.stats.promptTokens > 1000, "\(response.stats)")
        #expect(try await session.respond(to: Fixtures.capital).contains("Paris"))
    }

    @Test func cancelFromAnotherTaskWhileStreaming() async throws {
        let session = try await Fixtures.session()
        var pieces: [String] = []
        for try await piece in session.stream(Fixtures.long, options: GenerationOptions(maxTokens: Fixtures.manyTokens)) {
            pieces.append(piece)
            if pieces.count == 3 { Task.detached { session.cancel() } }
        }
        let stats = try #require(session.lastStats)
        #expect(stats.stopReason == .cancelled && stats.generatedTokens < 40, "\(stats)")
        #expect(try await session.respond(to: Fixtures.capital).contains("Paris"))
    }

    @Test func cancellingTheCallingTaskThrowsAndStops() async throws {
        let session = try await Fixtures.session()
        let reply = Task {
            try await session.respond(to: Fixtures.long, options: GenerationOptions(maxTokens: Fixtures.manyTokens))
        }
        try await Fixtures.waitUntil("the generation to start") { session.isResponding }
        reply.cancel()
        await #expect(throws: CancellationError.self) { try await reply.value }
        let stats = try #require(session.lastStats)
        #expect(stats.stopReason == .cancelled && stats.generatedTokens < 40, "\(stats)")
    }

    @Test func leavingTheStreamLoopCancels() async throws {
        let session = try await Fixtures.session()
        var n = 0
        for try await _ in session.stream(Fixtures.long, options: GenerationOptions(maxTokens: Fixtures.manyTokens)) {
            n += 1
            if n == 3 { break }
        }
        try await session.reset()  // runs after the abandoned generation has ended
        let stats = try #require(session.lastStats)
        #expect(stats.stopReason == .cancelled && stats.generatedTokens < 40, "\(stats)")
    }

    @Test func cancelWhileIdleDoesNotStopTheNextCall() async throws {
        let session = try await Fixtures.session()
        session.cancel()
        _ = try await session.respond(to: Fixtures.capital)
        #expect(session.lastStats?.stopReason == .endOfTurn)
    }

    @Test func chatSampleStopButton() async throws {
        let chat = await ChatModel(session: try await Fixtures.session(),
                                   options: GenerationOptions(maxTokens: Fixtures.manyTokens))
        await chat.send("Write a very long story about a dragon and a knight.")
        try await Fixtures.waitUntil("the first piece") { await !chat.partialReply.isEmpty }
        await chat.stop()
        await chat.waitForReply()
        let (messages, responding, stats) = await (chat.messages, chat.isResponding, chat.lastStats)
        #expect(!responding && messages.count == 2 && !messages[1].content.isEmpty)
        #expect(stats?.stopReason == .cancelled && stats!.generatedTokens < 40, "\(String(describing: stats))")
    }
}
