import ChatSample
import PocketLLM
import Testing

@Suite("Generation", .serialized, .enabled(if: Fixtures.hasModel, "the real model is missing (scripts/fetch_model.sh)"),
       .timeLimit(.minutes(2)))
struct GenerationTests {
    @Test func capitalOfFranceIsParis() async throws {
        let session = try await Fixtures.session()
        let reply = try await session.respond(to: Fixtures.capital)
        #expect(reply.contains("Paris"), "\(reply)")
        let stats = try #require(session.lastStats)
        #expect(stats.stopReason == .endOfTurn && stats.generatedTokens > 0 && stats.promptTokens > 10)
    }

    @Test func streamedPiecesJoinToTheBlockingReply() async throws {
        let session = try await Fixtures.session()
        let options = GenerationOptions(maxTokens: 48)
        let whole = try await session.response(to: .messages(Fixtures.story), options: options)
        var pieces: [String] = []
        for try await piece in session.stream(Fixtures.story, options: options) { pieces.append(piece) }
        #expect(pieces.count > 10 && pieces.allSatisfy { !$0.isEmpty })
        #expect(pieces.joined() == whole.text)
        #expect(whole.stats.stopReason == .maxTokens && whole.stats.generatedTokens == 48)
        #expect(session.lastStats?.generatedTokens == 48)
    }

    @Test func emojiAndCJKArriveIntact() async throws {
        let model = try await Fixtures.model()
        let line = "🚀🦙 東京タワー, naïve café\n"
        // Each of these characters takes more than one token in SmolLM2's byte-level
        // vocabulary, so its bytes arrive in several callbacks that the engine must join.
        for ch in ["🚀", "🦙", "東", "タ"] {
            let ids = try await model.tokenize(ch)
            #expect(ids.count > 1, "\(ch) is one token: the test would not split it")
        }
        let session = try await Fixtures.session()
        // Copying a repeated line is what even a small model does reliably (greedy).
        var pieces: [String] = []
        let prompt = Prompt.text(String(repeating: line, count: 4))
        for try await piece in session.stream(prompt, options: GenerationOptions(maxTokens: 40)) { pieces.append(piece) }
        #expect(!pieces.contains { $0.contains("\u{FFFD}") }, "a piece with a broken character: \(pieces)")
        #expect(pieces.joined().contains(line), "\(pieces.joined())")
    }

    @Test func followUpTurnReusesTheConversation() async throws {
        let session = try await Fixtures.session()
        var history = [Message.user(Fixtures.capital)]
        let first = try await session.response(to: .messages(history))
        history += [.assistant(first.text), .user("And of Italy?")]
        let second = try await session.response(to: .messages(history), options: GenerationOptions(maxTokens: 24))
        #expect(second.text.contains("Rome"), "\(second.text)")
        #expect(second.stats.reusedTokens >= first.stats.promptTokens - 1)  // only the new turn computed
    }

    @Test func stopStringsSeedsAndTemplateKwargs() async throws {
        let session = try await Fixtures.session()
        let stopped = try await session.response(to: .messages([.user(Fixtures.capital)]),
                                                 options: GenerationOptions(stop: ["Paris"]))
        #expect(!stopped.text.contains("Paris") && stopped.stats.stopReason == .stopString)

        let sampled = GenerationOptions(maxTokens: 16, temperature: 1.0, seed: 7)
        let a = try await session.respond(to: Fixtures.story, options: sampled)
        let b = try await session.respond(to: Fixtures.story, options: sampled)
        #expect(a == b)

        // SmolLM2's template reads no enable_thinking: accepted and without effect; a name the
        // engine sets itself is refused with the engine's message.
        let plain = try await session.respond(to: Fixtures.capital, options: GenerationOptions(maxTokens: 8))
        let kw = try await session.respond(to: Fixtures.capital,
                                           options: GenerationOptions(maxTokens: 8, chatTemplateKwargs: ["enable_thinking": false]))
        #expect(plain == kw)
        let error = await pocketLLMError {
            _ = try await session.respond(to: Fixtures.capital, options: GenerationOptions(chatTemplateKwargs: ["messages": 1]))
        }
        #expect(error?.code == .invalidArgument && error?.message.contains("messages") == true, "\(String(describing: error))")
    }

    @Test func fourSessionsAtOnce() async throws {
        let options = GenerationOptions(maxTokens: 16)
        let alone = try await Fixtures.session().respond(to: Fixtures.capital, options: options)
        let sessions = try await (0..<4).asyncMap { _ in try await Fixtures.session() }
        let replies = try await withThrowingTaskGroup(of: String.self) { group in
            for s in sessions { group.addTask { try await s.respond(to: Fixtures.capital, options: options) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(replies.count == 4 && replies.allSatisfy { $0 == alone }, "\(replies) vs \(alone)")
        #expect(alone.contains("Paris"))
    }

    @Test func chatSampleModelObjectChats() async throws {
        let chat = await ChatModel(session: try await Fixtures.session(), options: GenerationOptions(maxTokens: 32))
        await chat.send(Fixtures.capital)
        #expect(await chat.isResponding)
        await chat.waitForReply()
        let (messages, responding, error) = await (chat.messages, chat.isResponding, chat.errorMessage)
        #expect(messages.count == 2 && messages[1].role == .assistant && messages[1].content.contains("Paris"),
                "\(messages)")
        #expect(!responding && error == nil)
    }
}

extension Range<Int> {
    func asyncMap<T>(_ body: (Int) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for i in self { out.append(try await body(i)) }
        return out
    }
}
