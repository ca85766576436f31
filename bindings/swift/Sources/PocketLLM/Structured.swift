import CPocketLLM
import Foundation

/// What a reply must follow (`pllm_grammar_create`): a constraint the engine cannot enforce (a
/// schema keyword it does not support, a bad grammar) throws ``PocketLLMError`` naming it.
public enum ResponseFormat: Sendable, Hashable {
    /// One JSON object (OpenAI's JSON mode).
    case jsonObject
    /// A JSON Schema (draft 2020-12 subset), as JSON text.
    case jsonSchema(String)
    /// A llama.cpp GBNF grammar (start rule `root`).
    case grammar(String)
}

/// A type the model can be asked to write (Apple's guided generation, by hand): its JSON Schema,
/// whose property names are the type's coding keys. ``Session/respond(to:as:options:)`` decodes
/// the reply into it.
public protocol Generable: Decodable {
    static var jsonSchema: String { get }
}

/// A function the model may call. `parametersSchema` is the JSON Schema of its arguments object;
/// the engine holds every call to it (an argument it cannot constrain is an error at the call).
public protocol Tool: Sendable {
    var name: String { get }
    var description: String { get }
    var parametersSchema: String { get }
}

/// Which calls a reply may make (OpenAI's `tool_choice`); each is enforced by a grammar.
public enum ToolChoice: Sendable, Hashable {
    /// Text or calls, as the model decides.
    case auto
    /// Text only: the model cannot start a call.
    case none
    /// At least one call.
    case required
    /// One call of this function.
    case function(String)
}

/// A call the model made: `arguments` is JSON text of an object, valid against the tool's schema.
public struct ToolCall: Sendable, Hashable, Codable {
    public var id: String
    public var name: String
    public var arguments: String

    public init(id: String, name: String, arguments: String) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }

    /// The arguments decoded into `T`.
    public func decodeArguments<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(arguments.utf8))
    }

    // OpenAI's shape: {"id", "type": "function", "function": {"name", "arguments"}}.
    private enum Keys: String, CodingKey { case id, type, function }
    private enum FunctionKeys: String, CodingKey { case name, arguments }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        id = try c.decode(String.self, forKey: .id)
        let f = try c.nestedContainer(keyedBy: FunctionKeys.self, forKey: .function)
        name = try f.decode(String.self, forKey: .name)
        arguments = try f.decode(String.self, forKey: .arguments)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(id, forKey: .id)
        try c.encode("function", forKey: .type)
        var f = c.nestedContainer(keyedBy: FunctionKeys.self, forKey: .function)
        try f.encode(name, forKey: .name)
        try f.encode(arguments, forKey: .arguments)
    }
}

/// A constraint compiled for one model, freed with it.
final class GrammarHandle: @unchecked Sendable {
    let ptr: OpaquePointer

    init(_ model: ModelHandle, _ format: ResponseFormat) throws {
        var out: OpaquePointer?
        let status: pllm_status
        switch format {
        case .jsonObject: status = pllm_grammar_create(model.ptr, PLLM_GRAMMAR_JSON_SCHEMA, #"{"type": "object"}"#, &out)
        case .jsonSchema(let schema): status = pllm_grammar_create(model.ptr, PLLM_GRAMMAR_JSON_SCHEMA, schema, &out)
        case .grammar(let gbnf): status = pllm_grammar_create(model.ptr, PLLM_GRAMMAR_GBNF, gbnf, &out)
        }
        try check(status)
        ptr = out!
    }

    deinit { pllm_grammar_free(ptr) }
}

/// A request's tools compiled for one model (`pllm_tools_create`).
final class ToolsHandle: @unchecked Sendable {
    let ptr: OpaquePointer

    init(_ model: ModelHandle, _ tools: [any Tool], _ choice: ToolChoice, parallel: Bool) throws {
        var list: [[String: Any]] = []
        for t in tools {
            guard let params = try? JSONSerialization.jsonObject(with: Data(t.parametersSchema.utf8)) else {
                throw PocketLLMError(.invalidArgument, "tool '\(t.name)': parametersSchema is not JSON")
            }
            list.append(["type": "function",
                         "function": ["name": t.name, "description": t.description, "parameters": params]])
        }
        let choiceJSON: String = switch choice {
        case .auto: #""auto""#
        case .none: #""none""#
        case .required: #""required""#
        case .function(let name): String(decoding: try JSONSerialization.data(withJSONObject:
            ["type": "function", "function": ["name": name]]), as: UTF8.self)
        }
        let toolsJSON = String(decoding: try JSONSerialization.data(withJSONObject: list), as: UTF8.self)
        var out: OpaquePointer?
        try check(pllm_tools_create(model.ptr, toolsJSON, choiceJSON, parallel ? 1 : 0, &out))
        ptr = out!
    }

    /// A reply's tokens as content and calls (`pllm_tools_parse`).
    func parse(_ tokens: [Int32]) throws -> (content: String, calls: [ToolCall]) {
        var out: UnsafeMutablePointer<CChar>?
        try check(pllm_tools_parse(ptr, tokens, tokens.count, &out))
        defer { pllm_string_free(out) }
        struct Parsed: Decodable {
            var content: String?
            var tool_calls: [ToolCall]
        }
        let parsed = try JSONDecoder().decode(Parsed.self, from: Data(String(cString: out!).utf8))
        return (parsed.content ?? "", parsed.tool_calls)
    }

    deinit { pllm_tools_free(ptr) }
}

extension ModelHandle {
    /// A conversation as OpenAI's messages JSON, rendered with tools (`pllm_chat_apply_template_json`).
    func applyTemplateJSON(_ messages: [Message], tools: ToolsHandle?, kwargs: [String: TemplateValue]?) throws
        -> String {
        let json: String
        let variables: String?
        do {
            json = String(decoding: try JSONEncoder().encode(messages), as: UTF8.self)
            variables = try kwargs.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        } catch {
            throw PocketLLMError(.invalidArgument, "the conversation is not JSON: \(error)")
        }
        var out: UnsafeMutablePointer<CChar>?
        try check(pllm_chat_apply_template_json(ptr, json, tools?.ptr, 1, variables, &out))
        defer { pllm_string_free(out) }
        return out.map { String(cString: $0) } ?? ""
    }
}
