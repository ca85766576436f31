import CPocketLLM

/// Sampling and length of one generation. Fields left nil keep the model's own sampling
/// (`pllm_model_sampling_params`: its file's `general.sampling.*` values, else greedy).
public struct GenerationOptions: Sendable, Hashable {
    /// Tokens to generate at most.
    public var maxTokens: Int
    /// 0 is greedy.
    public var temperature: Float?
    public var topP: Float?
    public var topK: Int?
    public var minP: Float?
    public var repeatPenalty: Float?
    /// The sampler's seed (the engine's 0 when nil): the same seed gives the same reply.
    public var seed: UInt64?
    /// Generation stops when the text ends with one of these (which is not emitted).
    public var stop: [String]
    /// Variables the chat template reads besides the conversation, e.g.
    /// `["enable_thinking": false]` for Qwen3 (`pllm_chat_apply_template_vars`).
    public var chatTemplateKwargs: [String: TemplateValue]?
    /// What the reply must follow (JSON, a schema, a grammar); nil: free text.
    public var responseFormat: ResponseFormat?

    public init(maxTokens: Int = 256, temperature: Float? = nil, topP: Float? = nil, topK: Int? = nil,
                minP: Float? = nil, repeatPenalty: Float? = nil, seed: UInt64? = nil, stop: [String] = [],
                chatTemplateKwargs: [String: TemplateValue]? = nil, responseFormat: ResponseFormat? = nil) {
        self.maxTokens = maxTokens
        self.temperature = temperature
        self.topP = topP
        self.topK = topK
        self.minP = minP
        self.repeatPenalty = repeatPenalty
        self.seed = seed
        self.stop = stop
        self.chatTemplateKwargs = chatTemplateKwargs
        self.responseFormat = responseFormat
    }

    /// The model's sampling with these fields replaced, for the duration of `body` (the stop
    /// strings' C copies live that long). The engine checks the values' ranges.
    /// grammar: the tools' constraint, which excludes ``responseFormat``.
    func withSampling<R>(_ model: ModelHandle, grammar: OpaquePointer? = nil,
                         _ body: (inout pllm_sampling_params) throws -> R) throws -> R {
        var sp = pllm_model_sampling_params(model.ptr)
        if grammar != nil && responseFormat != nil {
            throw PocketLLMError(.invalidArgument, "tools and responseFormat exclude each other")
        }
        let format = try responseFormat.map { try GrammarHandle(model, $0) }
        sp.grammar = grammar ?? format?.ptr
        defer { withExtendedLifetime(format) {} }
        sp.max_tokens = try int32(maxTokens, "maxTokens")
        if let temperature { sp.temperature = temperature }
        if let topP { sp.top_p = topP }
        if let topK { sp.top_k = try int32(topK, "topK") }
        if let minP { sp.min_p = minP }
        if let repeatPenalty { sp.repeat_penalty = repeatPenalty }
        if let seed { sp.seed = seed }
        return try withCStrings(stop, "a stop string") { stops in
            try stops.withUnsafeBufferPointer { array in
                sp.stop_strings = array.isEmpty ? nil : array.baseAddress
                sp.n_stop_strings = array.count
                return try body(&sp)
            }
        }
    }
}

/// Why a generation ended (`pllm_stop_reason`).
public enum StopReason: Sendable, Hashable {
    /// The model ended its turn.
    case endOfTurn
    case maxTokens
    /// One of ``GenerationOptions/stop``.
    case stopString
    /// ``Session/cancel()``, or the stream's consumer went away.
    case cancelled
    /// The context filled up.
    case contextFull
}

/// What one generation did (`pllm_generation_stats`).
public struct GenerationStats: Sendable, Hashable {
    public var promptTokens: Int
    /// Of the prompt tokens, those already in the session's KV cache (earlier turns).
    public var reusedTokens: Int
    /// Of them, those restored from a prefix cache.
    public var cachedTokens: Int
    public var generatedTokens: Int
    /// From the start of the generation to its first token.
    public var timeToFirstTokenMs: Double
    public var prefillTokensPerSecond: Double
    public var decodeTokensPerSecond: Double
    public var stopReason: StopReason

    init(_ s: pllm_generation_stats) {
        promptTokens = Int(s.n_prompt_tokens)
        reusedTokens = Int(s.n_reused_tokens)
        cachedTokens = Int(s.n_cached_tokens)
        generatedTokens = Int(s.n_generated)
        timeToFirstTokenMs = s.ttft_ms
        prefillTokensPerSecond = s.prefill_tps
        decodeTokensPerSecond = s.decode_tps
        switch s.stop_reason {
        case PLLM_STOP_EOG: stopReason = .endOfTurn
        case PLLM_STOP_MAX_TOKENS: stopReason = .maxTokens
        case PLLM_STOP_STRING: stopReason = .stopString
        case PLLM_STOP_CONTEXT_FULL: stopReason = .contextFull
        // The package stops a generation through the token callback only to cancel it.
        default: stopReason = .cancelled
        }
    }

    /// A generation cancelled before the engine started it: nothing computed.
    static func cancelledBeforeStart(promptTokens: Int) -> GenerationStats {
        var s = GenerationStats(pllm_generation_stats())
        s.promptTokens = promptTokens
        s.stopReason = .cancelled
        return s
    }
}

/// A whole reply.
public struct Response: Sendable, Hashable {
    public var text: String
    public var stats: GenerationStats
    /// With tools: the calls the reply made (the text is the rest).
    public var toolCalls: [ToolCall] = []
}

/// One generation's cancellation: requested from any task, seen by the session's worker.
///
/// pllm_session_cancel stops whatever runs on the session, so it is called only while this
/// generation is the one running; before that the flag alone keeps it from starting, and the
/// token callback reads the flag too.
final class GenerationControl: Sendable {
    private enum Phase { case queued, running, done }
    private struct State { var phase = Phase.queued; var cancelled = false }
    private let state = Locked(State())
    private let session: SessionHandle

    init(_ session: SessionHandle) { self.session = session }

    func cancel() {
        state.withLock {
            $0.cancelled = true
            if $0.phase == .running { session.cancelRunning() }
        }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }
    var isRunning: Bool { state.withLock { $0.phase == .running } }

    /// On the worker, right before pllm_generate: false when cancelled already. (A cancel that
    /// lands between this and pllm_generate's start is cleared by it; the token callback then
    /// stops the generation at its first token, after the prefill.)
    func start() -> Bool {
        state.withLock {
            if $0.cancelled {
                $0.phase = .done
                return false
            }
            $0.phase = .running
            return true
        }
    }

    func finish() { state.withLock { $0.phase = .done } }
}

/// Runs pllm_generate on the calling thread (a session's worker), handing each piece of text
/// (complete UTF-8, as the engine promises) to `onPiece` as it comes.
func generate(_ session: OpaquePointer, _ tokens: [Int32], _ sampling: inout pllm_sampling_params,
              _ control: GenerationControl, onToken: ((Int32) -> Void)? = nil,
              onPiece: (String) -> Void) throws -> GenerationStats {
    guard control.start() else { return .cancelledBeforeStart(promptTokens: tokens.count) }
    defer { control.finish() }
    return try withoutActuallyEscaping(onPiece) { onPiece in
        let sink = TokenSink(onPiece: onPiece, control: control)
        var stats = pllm_generation_stats()
        sink.onToken = onToken  // (an optional closure escapes: it lives on the sink for the call)
        let status = withExtendedLifetime(sink) {
            pllm_generate(session, tokens, tokens.count, &sampling, { token, text, length, user in
                let sink = Unmanaged<TokenSink>.fromOpaque(user!).takeUnretainedValue()
                sink.onToken?(token)
                if length > 0, let text {
                    sink.onPiece(String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self))
                }
                return sink.control.isCancelled ? 1 : 0
            }, Unmanaged.passUnretained(sink).toOpaque(), &stats)
        }
        try check(status)
        return GenerationStats(stats)
    }
}

/// pllm_generate's user_data: lives on the worker's stack for the call.
private final class TokenSink {
    let onPiece: (String) -> Void
    let control: GenerationControl
    var onToken: ((Int32) -> Void)?

    init(onPiece: @escaping (String) -> Void, control: GenerationControl) {
        self.onPiece = onPiece
        self.control = control
    }
}
