import Foundation

/// A value behind a lock: the package's few pieces of state shared between the caller's tasks
/// and a session's worker thread.
///
/// `@unchecked Sendable` is safe here: `value` is private and only read or written inside
/// `lock`, and it is itself Sendable, so nothing reachable from it is shared unsynchronised.
/// (`Synchronization.Mutex` would say the same without `@unchecked`, but needs iOS 18.)
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
