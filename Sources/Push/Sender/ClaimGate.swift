import NIOConcurrencyHelpers

/// One broadcast claim in PostgreSQL at a time, daemon-wide (issue 43, item 5).
///
/// A broadcast drains over several connections, and each connection's claimer claimed on its own: up to one claim of
/// thousands of rows per connection at once, each a PostgreSQL backend busy for tens of milliseconds. On a busy machine
/// those backends took the cores chat's claims and commits wait for. Behind this gate a broadcast's claims take turns
/// (in the order they asked); a claim of thousands of rows still brings more rows than a connection sends in the time
/// the others take, so the broadcast drains as fast, and chat's statements find fewer backends ahead of them (in the
/// field bench chat's p50 during a broadcast fell from a median of 21 ms to 14 ms, docs/BENCHMARKS.md). Chat's claims
/// never pass through it. A claim holds the gate at most as long as any request may take (the server's
/// `statement_timeout`, or that plus 5 s from a server that stopped answering: ``DatabaseClient``), so a database that
/// fails over holds a broadcast's other connections no longer than it holds the claim itself.
final class ClaimGate: Sendable {
    private struct State {
        var busy = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    init() {}

    /// Runs `claim` when no other claim behind this gate runs, then lets the next in.
    func run<T: Sendable>(_ claim: () async throws -> T) async throws -> T {
        await enter()
        defer { leave() }
        return try await claim()
    }

    private func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLockedValue { state in
                guard state.busy else {
                    state.busy = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    private func leave() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        // The gate stays taken: the next claim in line holds it now.
        next?.resume()
    }
}
