import Foundation
import PocketLLM
import Testing

private struct Person: Generable, Equatable {
    var name: String
    var age: Int
    static let jsonSchema = """
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
         "required": ["name", "age"], "additionalProperties": false}
        """
}

private struct Weather: Tool {
    let name = "get_weather"
    let description = "The current weather in a city"
    let parametersSchema = """
        {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
         "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"], "additionalProperties": false}
        """
    struct Arguments: Decodable { var city: String; var unit: String }
}

@Suite("Structured output and tools", .serialized,
       .enabled(if: Fixtures.hasModel, "the real model is missing (scripts/fetch_model.sh)"), .timeLimit(.minutes(2)))
struct StructuredTests {
    @Test func generableReplyDecodes() async throws {
        let session = try await Fixtures.session()
        for seed in UInt64(1)...3 {
            let person = try await session.respond(to: "Describe a person as JSON.", as: Person.self,
                                                   options: GenerationOptions(maxTokens: 120, temperature: 1, seed: seed))
            #expect((0...120).contains(person.age) && person.name.count <= 20)
        }
    }

    @Test func responseFormatsAndTheirErrors() async throws {
        let session = try await Fixtures.session()
        let reply = try await session.response(to: .messages([.user("Reply with a JSON object with the keys name and age.")]),
                                               options: GenerationOptions(maxTokens: 300, responseFormat: .jsonObject))
        #expect(reply.stats.stopReason == .endOfTurn, "\(reply.text)")
        let parsed = try JSONSerialization.jsonObject(with: Data(reply.text.utf8))
        #expect(parsed is [String: Any])
        let yes = try await session.respond(to: "Yes or no?", options: GenerationOptions(
            maxTokens: 8, responseFormat: .grammar(#"root ::= "yes" | "no""#)))
        #expect(yes == "yes" || yes == "no")
        await #expect(throws: PocketLLMError.self) {
            _ = try await session.respond(to: "x", options: GenerationOptions(
                responseFormat: .jsonSchema(#"{"type": "string", "format": "hostname"}"#)))
        }
    }

    @Test func requiredToolCallDecodesAndASecondTurnRenders() async throws {
        let session = try await Fixtures.session()
        let ask = [Message.user("What is the weather in Paris?")]
        let first = try await session.response(to: ask, tools: [Weather()], toolChoice: .required,
                                               parallelToolCalls: false, options: GenerationOptions(maxTokens: 120))
        #expect(first.stats.stopReason == .endOfTurn)
        let call = try #require(first.toolCalls.first)
        #expect(first.toolCalls.count == 1 && call.name == "get_weather" && !call.id.isEmpty)
        let args = try call.decodeArguments(Weather.Arguments.self)
        #expect(["celsius", "fahrenheit"].contains(args.unit))
        let history = ask + [.assistant(first.text, toolCalls: first.toolCalls), .tool("21 C, clear", callId: call.id)]
        let second = try await session.response(to: history, tools: [Weather()], toolChoice: ToolChoice.none,
                                                options: GenerationOptions(maxTokens: 24))
        #expect(second.toolCalls.isEmpty && second.stats.promptTokens > first.stats.promptTokens)
    }

    @Test func badToolsAndHistoryThrow() async throws {
        let session = try await Fixtures.session()
        struct Bad: Tool {
            let name = "bad name"
            let description = ""
            let parametersSchema = #"{"type": "object"}"#
        }
        await #expect(throws: PocketLLMError.self) {
            _ = try await session.response(to: [.user("hi")], tools: [Bad()])
        }
        await #expect(throws: PocketLLMError.self) {
            _ = try await session.response(to: [.user("hi"), .tool("x", callId: "nope")], tools: [Weather()])
        }
        await #expect(throws: PocketLLMError.self) {
            _ = try await session.response(to: [.user("hi")], tools: [Weather()], toolChoice: .function("nope"))
        }
    }
}
