import CPocketLLM
import Dispatch
import Foundation

/// How a session's engine and KV cache are set up (`pllm_session_params`).
public struct SessionParams: Sendable, Hashable {
    public enum KVType: Sendable, Hashable { case f16, f32, q8, q4 }
    /// How activations meet quantised weights; the words are the CLI's `--act`.
    public enum Activations: Sendable, Hashable { case `default`, exact, int16, int8, f16, `static` }
    public enum Backend: Sendable, Hashable { case cpu, auto, vulkan }

    /// Context length in tokens; 0: min(the model's training context, 4096).
    public var contextLength: Int
    /// Threads of the session's engine; 0: one per performance core.
    public var threads: Int
    public var kvType: KVType
    /// 0: none; N: keep the first `kvSinks` positions and the most recent ones, N in all.
    public var kvWindow: Int
    public var kvSinks: Int
    /// Tokens per forward pass in prefill; 0: the engine's default.
    public var batch: Int
    public var activations: Activations
    public var backend: Backend

    public init(contextLength: Int = 0, threads: Int = 0, kvType: KVType = .f16, kvWindow: Int = 0,
                kvSinks: Int = 4, batch: Int = 0, activations: Activations = .default, backend: Backend = .cpu) {
        self.contextLength = contextLength
        self.threads = threads
        self.kvType = kvType
        self.kvWindow = kvWindow
        self.kvSinks = kvSinks
        self.batch = batch
        self.activations = activations
        self.backend = backend
    }

    func c() throws(PocketLLMError) -> pllm_session_params {
        var p = pllm_session_default_params()
        p.n_ctx = try int32(contextLength, "contextLength")
        p.n_threads = try int32(threads, "threads")
        p.kv_window = try int32(kvWindow, "kvWindow")
        p.kv_sinks = try int32(kvSinks, "kvSinks")
        p.n_batch = try int32(batch, "batch")
        let kv: pllm_kv_type = switch kvType {
        case .f16: PLLM_KV_F16
        case .f32: PLLM_KV_F32
        case .q8: PLLM_KV_Q8
        case .q4: PLLM_KV_Q4
        }
        let act: pllm_activations = switch activations {
        case .default: PLLM_ACT_DEFAULT
        case .exact: PLLM_ACT_EXACT
        case .int16: PLLM_ACT_INT16
        case .int8: PLLM_ACT_INT8
        case .f16: PLLM_ACT_F16
        case .static: PLLM_ACT_STATIC
        }
        let be: pllm_backend = switch backend {
        case .cpu: PLLM_BACKEND_CPU
        case .auto: PLLM_BACKEND_AUTO
        case .vulkan: PLLM_BACKEND_VULKAN
        }
        p.kv_type = Int32(kv.rawValue)
        p.activations = Int32(act.rawValue)
        p.backend = Int32(be.rawValue)
        return p
    }
}

/// Owns a `pllm_session`.
///
/// `@unchecked Sendable` is safe here: `ptr` is only read or written under `lock`; every C call
/// with it runs on the owning session's serial queue (one thread at a time, as pocketllm.h
/// asks) — the free included — except `pllm_session_cancel`, which pocketllm.h allows from any
/// thread and which runs under `lock`, so it never meets a freed session.
final class SessionHandle: @unchecked Sendable {
    /// Keeps the weights (and the tokenizer the session's calls use) loaded.
    let model: ModelHandle
    private let lock = NSLock()
    private var ptr: OpaquePointer?

    init(model: ModelHandle, params: SessionParams) throws {
        self.model = model
        var p = try params.c()
        var out: OpaquePointer?
        try check(pllm_session_create(model.ptr, &p, &out))
        ptr = out
    }

    /// The session, or invalidArgument once closed. On the session's queue.
    func pointer() throws(PocketLLMError) -> OpaquePointer {
        guard let p = lock.withLock({ ptr }) else { throw PocketLLMError(.invalidArgument, "the session is closed") }
        return p
    }

    func cancelRunning() { lock.withLock { if let ptr { pllm_session_cancel(ptr) } } }

    /// On the session's queue, after everything submitted before.
    func free() {
        let p = lock.withLock { () -> OpaquePointer? in
            defer { ptr = nil }
            return ptr
        }
        if let p { pllm_session_free(p) }
    }

    deinit { if let ptr { pllm_session_free(ptr) } }
}

/// One conversation over a ``Model``: its own KV cache and its own worker thread.
///
/// Each call passes the whole conversation (the session does not keep a transcript); the
/// session reuses the longest prefix of it that its KV cache holds, so a follow-up turn costs
/// only the new tokens. Calls on one session run one after another, in the order made;
/// sessions of one model run in parallel.
///
/// Generation runs on the session's own serial `DispatchQueue`, never on the caller's thread
/// or Swift's cooperative pool. It stops at the next token (or within the prefill step) when
/// the calling task is cancelled, when a stream's consumer stops iterating, or on ``cancel()``.
public final class Session: Sendable {
    public let model: Model
    private let handle: SessionHandle
    private let queue = DispatchQueue(label: "pocketllm.session", qos: .userInitiated)

    private struct State {
        var closed = false
        /// Generations submitted and not yet finished, oldest first.
        var pending: [GenerationControl] = []
        var lastStats: GenerationStats?
    }
    private let state = Locked(State())

    public init(model: Model, params: SessionParams = SessionParams()) async throws {
        self.model = model
        let modelHandle = try await model.live()
        handle = try await runBlocking(on: queue) { try SessionHandle(model: modelHandle, params: params) }
    }

    deinit {
        // Frees the C session after whatever generation still runs on it.
        let handle = handle
        queue.async { handle.free() }
    }

    // ---- generation -----------------------------------------------------------------------

    /// The reply to `prompt` as a user's message.
    public func respond(to prompt: String, options: GenerationOptions = GenerationOptions()) async throws -> String {
        try await response(to: .messages([.user(prompt)]), options: options).text
    }

    /// The reply to a conversation.
    public func respond(to messages: [Message], options: GenerationOptions = GenerationOptions()) async throws
        -> String {
        try await response(to: .messages(messages), options: options).text
    }

    /// The reply with its ``GenerationStats``. After ``cancel()`` it holds what was generated
    /// so far (stop reason ``StopReason/cancelled``); when the calling task is cancelled it
    /// throws `CancellationError`.
    public func response(to prompt: Prompt, options: GenerationOptions = GenerationOptions()) async throws
        -> Response {
        let control = try register()
        let response = try await withTaskCancellationHandler {
            try await runBlocking(on: queue) { [handle, state] in
                var text = ""
                let stats = try Self.run(handle, state, prompt, options, control) { text += $0 }
                return Response(text: text, stats: stats)
            }
        } onCancel: {
            control.cancel()
        }
        try Task.checkCancellation()
        return response
    }

    /// The reply decoded as `T`: generated under `T.jsonSchema`, so it parses (a schema the
    /// engine cannot enforce throws, naming the keyword).
    public func respond<T: Generable>(to prompt: String, as type: T.Type,
                                      options: GenerationOptions = GenerationOptions()) async throws -> T {
        try await respond(to: [.user(prompt)], as: type, options: options)
    }

    public func respond<T: Generable>(to messages: [Message], as type: T.Type,
                                      options: GenerationOptions = GenerationOptions()) async throws -> T {
        var options = options
        options.responseFormat = .jsonSchema(T.jsonSchema)
        let reply = try await response(to: .messages(messages), options: options)
        guard reply.stats.stopReason == .endOfTurn else {
            throw PocketLLMError(.outOfRange, "the reply was cut (\(reply.stats.stopReason)) before the JSON ended")
        }
        return try JSONDecoder().decode(T.self, from: Data(reply.text.utf8))
    }

    /// A reply that may call `tools` (``Response/toolCalls``; each call's arguments valid against
    /// its tool's schema). `toolChoice` is enforced; `parallelToolCalls` allows several calls.
    /// Pass the calls back as ``Message/assistant(_:toolCalls:)`` and each result as
    /// ``Message/tool(_:callId:)`` for the next turn.
    public func response(to messages: [Message], tools: [any Tool], toolChoice: ToolChoice = .auto,
                         parallelToolCalls: Bool = true, options: GenerationOptions = GenerationOptions())
        async throws -> Response {
        let control = try register()
        let response = try await withTaskCancellationHandler {
            try await runBlocking(on: queue) { [handle, state] in
                let compiled = try ToolsHandle(handle.model, tools, toolChoice, parallel: parallelToolCalls)
                var ids: [Int32] = []
                let stats = try Self.run(handle, state, .messages(messages), options, control, tools: compiled,
                                         onToken: { ids.append($0) }) { _ in }
                let (content, calls) = try compiled.parse(ids)
                return Response(text: content, stats: stats, toolCalls: calls)
            }
        } onCancel: {
            control.cancel()
        }
        try Task.checkCancellation()
        return response
    }

    /// The reply's pieces as the engine makes them (each complete UTF-8 text; joined, they are
    /// what ``respond(to:options:)-(String,_)`` returns). Breaking out of the `for try await`
    /// loop, cancelling its task or dropping the stream cancels the generation.
    public func stream(_ prompt: String, options: GenerationOptions = GenerationOptions())
        -> AsyncThrowingStream<String, Error> {
        stream(.messages([.user(prompt)]), options: options)
    }

    public func stream(_ messages: [Message], options: GenerationOptions = GenerationOptions())
        -> AsyncThrowingStream<String, Error> {
        stream(.messages(messages), options: options)
    }

    public func stream(_ prompt: Prompt, options: GenerationOptions = GenerationOptions())
        -> AsyncThrowingStream<String, Error> {
        // Unbounded: the worker never waits for the consumer, so an abandoned stream cannot
        // hold the session (and cancelling never waits on a full buffer).
        let (stream, continuation) = AsyncThrowingStream<String, Error>.makeStream()
        let control: GenerationControl
        do {
            control = try register()
        } catch {
            continuation.finish(throwing: error)
            return stream
        }
        continuation.onTermination = { termination in
            if case .cancelled = termination { control.cancel() }
        }
        queue.async { [handle, state] in
            do {
                _ = try Self.run(handle, state, prompt, options, control) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        return stream
    }

    /// Stops the generations running or waiting on this session (from any thread or task):
    /// a stream ends, ``response(to:options:)`` returns what it has.
    public func cancel() {
        for c in state.withLock({ $0.pending }) { c.cancel() }
    }

    /// True while a generation runs on the session's worker.
    public var isResponding: Bool { state.withLock { $0.pending.contains { $0.isRunning } } }

    /// The stats of the last generation that ended (a stream's too).
    public var lastStats: GenerationStats? { state.withLock { $0.lastStats } }

    /// Forgets the conversation (empties the KV cache), after the calls made before.
    public func reset() async throws {
        try checkOpen()
        try await runBlocking(on: queue) { [handle] in pllm_session_reset(try handle.pointer()) }
    }

    /// Context length in tokens.
    public var contextLength: Int {
        get async throws {
            try await runBlocking(on: queue) { [handle] in Int(pllm_session_n_ctx(try handle.pointer())) }
        }
    }

    /// Stops any generation and frees the KV cache (once the running one has stopped). Later
    /// calls throw. Idempotent.
    public func close() {
        let wasClosed = state.withLock { s in
            defer { s.closed = true }
            return s.closed
        }
        guard !wasClosed else { return }
        cancel()
        queue.async { [handle] in handle.free() }
    }

    // ---- internals ------------------------------------------------------------------------

    private func checkOpen() throws(PocketLLMError) {
        if state.withLock({ $0.closed }) { throw PocketLLMError(.invalidArgument, "the session is closed") }
    }

    private func register() throws(PocketLLMError) -> GenerationControl {
        let control = GenerationControl(handle)
        try state.withLock { s throws(PocketLLMError) in
            if s.closed { throw PocketLLMError(.invalidArgument, "the session is closed") }
            s.pending.append(control)
        }
        return control
    }

    /// One generation, on the session's queue.
    private static func run(_ handle: SessionHandle, _ state: Locked<State>, _ prompt: Prompt,
                            _ options: GenerationOptions, _ control: GenerationControl,
                            tools: ToolsHandle? = nil, onToken: ((Int32) -> Void)? = nil,
                            onPiece: (String) -> Void) throws -> GenerationStats {
        var stats: GenerationStats?
        defer {
            control.finish()
            state.withLock { s in
                s.pending.removeAll { $0 === control }
                if let stats { s.lastStats = stats }
            }
        }
        let session = try handle.pointer()
        let tokens = try handle.model.tokens(for: prompt, kwargs: options.chatTemplateKwargs, tools: tools)
        stats = try options.withSampling(handle.model, grammar: tools.map { pllm_tools_grammar($0.ptr) }) { sampling in
            try generate(session, tokens, &sampling, control, onToken: onToken, onPiece: onPiece)
        }
        withExtendedLifetime(tools) {}
        return stats!
    }
}
