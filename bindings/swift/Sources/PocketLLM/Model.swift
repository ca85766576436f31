import CPocketLLM
import Dispatch

/// How a model file is loaded (`pllm_model_params`).
public struct ModelParams: Sendable, Hashable {
    /// Weights held as 16-row panels for the kernels that read them (`repack_weights`).
    public enum Repack: Sendable, Hashable {
        /// The types the default (int16) activations read as panels on this CPU.
        case auto
        /// Every type with a panel kernel (for int8 sessions).
        case on
        /// The file's layout (for exact or f16 sessions).
        case off
    }

    /// How chat messages become a prompt (`chat_template`).
    public enum ChatTemplate: Sendable, Hashable {
        /// The file's own `tokenizer.chat_template`, rendered by the engine's Jinja interpreter.
        case file
        /// The built-in layout of the family the template is recognised as.
        case native
    }

    /// Load only the tokenizer (works on files without tensors).
    public var vocabOnly: Bool
    public var repack: Repack
    public var chatTemplate: ChatTemplate

    public init(vocabOnly: Bool = false, repack: Repack = .auto, chatTemplate: ChatTemplate = .file) {
        self.vocabOnly = vocabOnly
        self.repack = repack
        self.chatTemplate = chatTemplate
    }

    var c: pllm_model_params {
        var p = pllm_model_default_params()
        p.vocab_only = vocabOnly ? 1 : 0
        switch repack {
        case .auto: p.repack_weights = PLLM_REPACK_AUTO
        case .on: p.repack_weights = PLLM_REPACK_ON
        case .off: p.repack_weights = PLLM_REPACK_OFF
        }
        p.chat_template = chatTemplate == .native ? PLLM_CHAT_TEMPLATE_NATIVE : PLLM_CHAT_TEMPLATE_FILE
        return p
    }
}

/// A loaded `pllm_model`, freed when the last holder lets go: the `Model`, its sessions and
/// their generations each hold it, so closing the model never frees weights in use.
///
/// `@unchecked Sendable` is safe here: the pointer never changes, and a pllm_model is immutable
/// after loading and may be used by many threads at once (pocketllm.h, "Threading").
final class ModelHandle: @unchecked Sendable {
    let ptr: OpaquePointer

    init(path: String, params: ModelParams) throws(PocketLLMError) {
        guard !path.utf8.contains(0) else { throw PocketLLMError(.invalidArgument, "the model path contains a NUL") }
        var p = params.c
        var out: OpaquePointer?
        try check(pllm_model_load(path, &p, &out))
        guard let out else { throw PocketLLMError(.internal, "pllm_model_load returned no model") }
        ptr = out
    }

    deinit { pllm_model_free(ptr) }
}

/// A model file loaded into memory: its weights, tokenizer and chat template, shared by any
/// number of sessions (``Session``), each one conversation.
///
/// Loading runs on a background thread, never on the caller's or Swift's cooperative pool.
/// ``close()`` lets go of the weights; they are freed once the sessions made from the model are
/// gone too.
public actor Model {
    /// The file the model was loaded from.
    public nonisolated let path: String
    private var handle: ModelHandle?

    /// Loads the GGUF file at `path`. Throws ``PocketLLMError`` with the engine's message for a
    /// missing, unreadable, corrupt or unsupported file.
    public init(path: String, params: ModelParams = ModelParams()) async throws {
        self.path = path
        handle = try await runBlocking(on: .global(qos: .userInitiated)) {
            try ModelHandle(path: path, params: params)
        }
    }

    /// Lets go of the weights (freed when the last session made from them is gone too). A later
    /// call on the model throws; sessions made before keep working. Idempotent.
    public func close() { handle = nil }

    /// A new conversation over this model (its own KV cache).
    public func makeSession(_ params: SessionParams = SessionParams()) async throws -> Session {
        try await Session(model: self, params: params)
    }

    /// The loaded model's handle, or invalidArgument once the model is closed.
    func live() throws(PocketLLMError) -> ModelHandle {
        guard let handle else { throw PocketLLMError(.invalidArgument, "the model is closed") }
        return handle
    }

    // ---- what the C API tells about the model ------------------------------------------------

    public var vocabularySize: Int { get throws { Int(pllm_model_n_vocab(try live().ptr)) } }
    public var trainingContextLength: Int { get throws { Int(pllm_model_n_ctx_train(try live().ptr)) } }

    /// Token ids of `text` (`pllm_tokenize`).
    public func tokenize(_ text: String, addSpecial: Bool = false, parseSpecial: Bool = false) throws -> [Int32] {
        try live().tokenize(text, addSpecial: addSpecial, parseSpecial: parseSpecial)
    }

    /// Text of token ids (`pllm_detokenize`).
    public func detokenize(_ tokens: [Int32], renderSpecial: Bool = false) throws -> String {
        try live().detokenize(tokens, renderSpecial: renderSpecial)
    }

    /// The prompt the model's chat template makes of `messages` (`pllm_chat_apply_template_vars`).
    public func applyChatTemplate(_ messages: [Message], addGenerationPrompt: Bool = true,
                                  kwargs: [String: TemplateValue]? = nil) throws -> String {
        try live().applyTemplate(messages, addGenerationPrompt: addGenerationPrompt, kwargs: kwargs)
    }
}

/// Runs blocking C work on `queue` (a thread of the package's, not Swift's cooperative pool)
/// and resumes the caller with its result.
func runBlocking<T: Sendable>(on queue: DispatchQueue,
                              _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        queue.async { continuation.resume(with: Result(catching: body)) }
    }
}
