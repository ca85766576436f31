import CPocketLLM

/// A failed call: the C API's status and its message (`pllm_last_error`), or a Swift value the
/// C API cannot take (an out-of-range number, a NUL in a string, a closed session).
public struct PocketLLMError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `pllm_status` values.
    public enum Code: UInt32, Sendable, Hashable {
        case invalidArgument = 1, io, badFormat, unsupported, outOfRange, outOfMemory, cancelled, `internal`
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// Throws the calling thread's last error unless `status` is PLLM_OK. Call it right after the C
/// call and on the same thread: pllm_last_error is per thread.
func check(_ status: pllm_status) throws(PocketLLMError) {
    guard status != PLLM_OK else { return }
    throw PocketLLMError(PocketLLMError.Code(rawValue: UInt32(status.rawValue)) ?? .internal,
                         String(cString: pllm_last_error()))
}

/// `value` as the C API's int32, or invalidArgument naming `what` (a plain conversion would trap).
func int32(_ value: Int, _ what: String) throws(PocketLLMError) -> Int32 {
    guard let v = Int32(exactly: value) else {
        throw PocketLLMError(.invalidArgument, "\(what) must fit in 32 bits, not \(value)")
    }
    return v
}
