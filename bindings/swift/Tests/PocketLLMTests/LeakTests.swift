// 1,000 load / session / generate / close cycles of a tiny model leave the resident memory
// where it was: every C handle the package makes is freed. Measured here: each model kept
// alive adds about 0.9 MB and each session about 1.2 MB, so a leak of either (a retain cycle
// would keep both) grows 900 cycles by about 800 MB; the allocator's own growth as GCD threads
// come and go (glibc arenas) stayed near 11 MB when the other suites had run first.
import Foundation
import PocketLLM
import Testing

/// Resident set size in bytes (Linux: /proc/self/statm's second field, in pages).
private func residentBytes() throws -> Int {
    let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
    return Int(statm[1])! * Int(sysconf(Int32(_SC_PAGESIZE)))
}

@Suite("Leaks", .serialized, .timeLimit(.minutes(3)))
struct LeakTests {
    #if os(Linux)
    @Test(.enabled(if: Fixtures.tinyModelPath != nil, "POCKETLLM_SWIFT_TINY_MODEL is not set (scripts/test_swift.sh sets it)"))
    func thousandLoadCloseCycles() async throws {
        let path = try #require(Fixtures.tinyModelPath)
        func cycle() async throws {
            let model = try await Model(path: path)
            let session = try await model.makeSession(SessionParams(threads: 1))
            let r = try await session.response(to: .text("hello"), options: GenerationOptions(maxTokens: 2))
            #expect(r.stats.promptTokens > 0)
            session.close()
            await model.close()
        }
        for _ in 0..<100 { try await cycle() }  // warm-up: allocator pools, thread caches
        let before = try residentBytes()
        for _ in 0..<900 { try await cycle() }
        let grown = try residentBytes() - before
        #expect(grown < 32 << 20, "resident memory grew by \(grown >> 10) KiB over 900 cycles")
    }
    #endif
}
