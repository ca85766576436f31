import CPocketLLM
import Foundation

/// One turn of a conversation.
public struct Message: Sendable, Hashable, Codable {
    /// Who speaks. The chat template decides which roles it knows ("system", "user" and
    /// "assistant" everywhere); any other name is passed through to it.
    public struct Role: RawRepresentable, Sendable, Hashable, Codable, ExpressibleByStringLiteral {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { rawValue = value }

        public static let system: Role = "system"
        public static let user: Role = "user"
        public static let assistant: Role = "assistant"
        /// A tool's result, answering ``Message/toolCallId``.
        public static let tool: Role = "tool"
    }

    public var role: Role
    public var content: String
    /// The calls an assistant turn made (``Response/toolCalls``, passed back in the history).
    public var toolCalls: [ToolCall]?
    /// A tool turn: the id of the call it answers.
    public var toolCallId: String?

    public init(role: Role, content: String, toolCalls: [ToolCall]? = nil, toolCallId: String? = nil) {
        self.role = role
        self.content = content
        self.toolCalls = toolCalls
        self.toolCallId = toolCallId
    }

    /// OpenAI's field names (the engine reads the conversation as OpenAI's messages JSON).
    private enum CodingKeys: String, CodingKey {
        case role, content
        case toolCalls = "tool_calls"
        case toolCallId = "tool_call_id"
    }

    public static func system(_ content: String) -> Message { Message(role: .system, content: content) }
    public static func user(_ content: String) -> Message { Message(role: .user, content: content) }
    public static func assistant(_ content: String) -> Message { Message(role: .assistant, content: content) }
    /// An assistant turn that called tools.
    public static func assistant(_ content: String, toolCalls: [ToolCall]) -> Message {
        Message(role: .assistant, content: content, toolCalls: toolCalls)
    }
    /// A tool's result for the call `callId`.
    public static func tool(_ content: String, callId: String) -> Message {
        Message(role: .tool, content: content, toolCallId: callId)
    }
}

/// A value of a chat template variable (``GenerationOptions/chatTemplateKwargs``), e.g.
/// `["enable_thinking": false]` for Qwen3. Sent to the engine as JSON.
public enum TemplateValue: Sendable, Hashable, Encodable, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral {
    case bool(Bool), int(Int), double(Double), string(String)

    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .bool(let v): try c.encode(v)
        case .int(let v): try c.encode(v)
        case .double(let v): try c.encode(v)
        case .string(let v): try c.encode(v)
        }
    }
}

/// What a generation continues.
public enum Prompt: Sendable, Hashable {
    /// A conversation, rendered with the model's chat template (the reply's turn opened).
    case messages([Message])
    /// Raw text: no template; special tokens written in it are parsed, BOS added when the model
    /// wants one (`pllm_tokenize_prompt`).
    case text(String)
    /// Token ids as they are.
    case tokens([Int32])
}

/// NUL-terminated copies of `strings` for the duration of `body` (a Swift string with a NUL
/// would be cut there silently: refused instead).
func withCStrings<R>(_ strings: [String], _ what: String,
                     _ body: ([UnsafePointer<CChar>?]) throws -> R) throws -> R {
    if strings.contains(where: { $0.utf8.contains(0) }) {
        throw PocketLLMError(.invalidArgument, "\(what) contains a NUL character")
    }
    let copies = strings.map { UnsafePointer(strdup($0)) }
    defer { copies.forEach { free(UnsafeMutablePointer(mutating: $0)) } }
    return try body(copies)
}

/// Text <-> tokens through the model's tokenizer and template. Any thread: the model is immutable.
extension ModelHandle {
    /// Calls a C function of the API's "capacity" convention: one try with a buffer that nearly
    /// always suffices, a second with the size the first reported when it was too small.
    private func grow<T>(_ initial: Int, _ fill: (UnsafeMutablePointer<T>, Int, inout Int) -> pllm_status)
        throws -> [T] {
        var capacity = max(initial, 1)
        for _ in 0..<2 {
            var needed = 0
            var status = PLLM_OK
            let out = [T](unsafeUninitializedCapacity: capacity) { buffer, count in
                status = fill(buffer.baseAddress!, capacity, &needed)
                count = status == PLLM_OK ? needed : 0
            }
            if status == PLLM_ERR_OUT_OF_RANGE && needed > capacity {
                capacity = needed
                continue
            }
            try check(status)
            return out
        }
        throw PocketLLMError(.internal, "the size the C API asked for did not suffice")
    }

    private func tokens(of text: String,
                        _ call: (UnsafePointer<CChar>, Int, UnsafeMutablePointer<pllm_token>, Int, inout Int) -> pllm_status)
        throws -> [Int32] {
        // Passed with its length (a NUL inside is text like any other); the terminator only
        // gives an empty string an address.
        let utf8 = Array(text.utf8) + [0]
        return try utf8.withUnsafeBufferPointer { bytes in
            // A token covers at least one byte, plus a few specials.
            try grow(utf8.count + 8) { out, capacity, needed in
                bytes.withMemoryRebound(to: CChar.self) { call($0.baseAddress!, $0.count - 1, out, capacity, &needed) }
            }
        }
    }

    func tokenize(_ text: String, addSpecial: Bool, parseSpecial: Bool) throws -> [Int32] {
        try tokens(of: text) { text, n, out, capacity, needed in
            pllm_tokenize(ptr, text, n, addSpecial ? 1 : 0, parseSpecial ? 1 : 0, out, capacity, &needed)
        }
    }

    /// A prompt's tokens the way the CLI and the other bindings make them.
    func promptTokens(_ text: String) throws -> [Int32] {
        try tokens(of: text) { text, n, out, capacity, needed in
            pllm_tokenize_prompt(ptr, text, n, out, capacity, &needed)
        }
    }

    func detokenize(_ tokens: [Int32], renderSpecial: Bool) throws -> String {
        let bytes: [UInt8] = try tokens.withUnsafeBufferPointer { ids in
            try grow(16 * tokens.count + 64) { (out: UnsafeMutablePointer<UInt8>, capacity, needed) in
                out.withMemoryRebound(to: CChar.self, capacity: capacity) {
                    pllm_detokenize(ptr, ids.baseAddress, ids.count, renderSpecial ? 1 : 0, $0, capacity, &needed)
                }
            }
        }
        // A slice of a sequence may cut a character in two: the cut part decodes as U+FFFD.
        return String(decoding: bytes, as: UTF8.self)
    }

    func applyTemplate(_ messages: [Message], addGenerationPrompt: Bool, kwargs: [String: TemplateValue]?) throws
        -> String {
        var variables: String?
        if let kwargs {
            do {
                variables = String(decoding: try JSONEncoder().encode(kwargs), as: UTF8.self)
            } catch {
                throw PocketLLMError(.invalidArgument, "chat template kwargs are not JSON: \(error)")
            }
        }
        return try withCStrings(messages.map(\.role.rawValue), "a message's role") { roles in
            try withCStrings(messages.map(\.content), "a message's content") { contents in
                let cMessages = (0..<messages.count).map { pllm_chat_message(role: roles[$0], content: contents[$0]) }
                var out: UnsafeMutablePointer<CChar>?
                try check(pllm_chat_apply_template_vars(ptr, cMessages, cMessages.count, addGenerationPrompt ? 1 : 0,
                                                        variables, &out))
                defer { pllm_string_free(out) }
                return out.map { String(cString: $0) } ?? ""
            }
        }
    }

    /// The token ids a generation starts from (with tools, or earlier calls in the history, the
    /// conversation goes to the engine as OpenAI's messages JSON).
    func tokens(for prompt: Prompt, kwargs: [String: TemplateValue]?, tools: ToolsHandle? = nil) throws -> [Int32] {
        switch prompt {
        case .messages(let messages) where tools != nil || messages.contains(where: { $0.toolCalls != nil || $0.role == .tool }):
            return try promptTokens(applyTemplateJSON(messages, tools: tools, kwargs: kwargs))
        case .messages(let messages):
            return try promptTokens(applyTemplate(messages, addGenerationPrompt: true, kwargs: kwargs))
        case .text(let text):
            return try promptTokens(text)
        case .tokens(let ids):
            return ids
        }
    }
}
