// The model object of a SwiftUI chat screen over PocketLLM: the conversation, the reply as it
// streams in, a stop button's action. Copy it into an app that depends on the PocketLLM package.
//
// The package compiles this file on every platform (the ChatSample target, and its test drives
// a real chat on Linux); the view at the end compiles where SwiftUI exists.
import Observation
import PocketLLM

@MainActor
@Observable
public final class ChatModel {
    /// The conversation so far, the system prompt first when there is one.
    public private(set) var messages: [Message]
    /// The assistant's reply while it streams (moved into `messages` when it ends).
    public private(set) var partialReply = ""
    public private(set) var isResponding = false
    /// The last generation's error, for an alert.
    public private(set) var errorMessage: String?
    public var options: GenerationOptions

    private let session: Session
    private var reply: Task<Void, Never>?

    public init(session: Session, systemPrompt: String? = nil,
                options: GenerationOptions = GenerationOptions(maxTokens: 512)) {
        self.session = session
        self.messages = systemPrompt.map { [.system($0)] } ?? []
        self.options = options
    }

    /// Loads the model file (on a background thread) and opens a session on it.
    public static func load(path: String, systemPrompt: String? = nil) async throws -> ChatModel {
        let model = try await Model(path: path)
        return ChatModel(session: try await model.makeSession(), systemPrompt: systemPrompt)
    }

    /// Sends the user's text and streams the reply into `partialReply`.
    public func send(_ text: String) {
        guard !isResponding, !text.isEmpty else { return }
        messages.append(.user(text))
        partialReply = ""
        errorMessage = nil
        isResponding = true
        let stream = session.stream(messages, options: options)
        reply = Task {
            do {
                for try await piece in stream { partialReply += piece }
            } catch is CancellationError {
            } catch {
                errorMessage = "\(error)"
            }
            messages.append(.assistant(partialReply))
            partialReply = ""
            isResponding = false
        }
    }

    /// The stop button: the generation stops at its next token and the reply so far stays.
    /// (Cancelling `reply` would end the stream at once and cancel the generation too, but
    /// without waiting for it to stop.)
    public func stop() { session.cancel() }

    /// The last reply's stats (tokens, speed, why it ended), for a status line.
    public var lastStats: GenerationStats? { session.lastStats }

    /// Waits for the reply in progress (previews, tests).
    public func waitForReply() async { await reply?.value }

    /// Starts a new conversation (the system prompt stays).
    public func clear() {
        reply?.cancel()
        messages.removeAll { $0.role != .system }
    }
}

#if canImport(SwiftUI)
import SwiftUI

public struct ChatView: View {
    @State private var chat: ChatModel
    @State private var draft = ""

    public init(chat: ChatModel) { _chat = State(initialValue: chat) }

    public var body: some View {
        VStack {
            ScrollView {
                ForEach(Array(chat.messages.enumerated()), id: \.offset) { _, message in
                    Text(message.content)
                        .frame(maxWidth: .infinity, alignment: message.role == .user ? .trailing : .leading)
                }
                if chat.isResponding { Text(chat.partialReply).frame(maxWidth: .infinity, alignment: .leading) }
            }
            HStack {
                TextField("Message", text: $draft).onSubmit(send)
                if chat.isResponding {
                    Button("Stop", action: chat.stop)
                } else {
                    Button("Send", action: send)
                }
            }
        }
        .padding()
    }

    private func send() {
        chat.send(draft)
        draft = ""
    }
}
#endif
