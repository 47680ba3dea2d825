import NIOConcurrencyHelpers

/// Wakes waiting workers when rows are queued (NOTIFY), when the listener reconnects, or at shutdown.
///
/// A waiter passes the generation it saw before looking for work, so a signal between "found nothing" and
/// "start waiting" is never lost.
package final class QueueSignal: Sendable {
    private struct State {
        var generation = 0
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = NIOLockedValueBox(State())

    package init() {}

    package var generation: Int { state.withLockedValue { $0.generation } }

    /// Wakes every waiter.
    package func signal() {
        let waiters = state.withLockedValue { state in
            state.generation += 1
            let waiters = state.waiters
            state.waiters = [:]
            return waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns when the generation moves past `generation`, or after `timeout`.
    package func wait(after generation: Int, timeout: Duration) async {
        await Self.wait(for: [(self, generation)], timeout: timeout)
    }

    /// Like ``wait(after:timeout:)``, but returns no sooner than `spacing` after `since`. A loop that looks for work on
    /// every signal then looks at most once per `spacing` while signals come faster: a dormant lane, or the broadcast
    /// expansion, under another lane's chat wakes on hundreds of NOTIFYs a second, and each look was a statement of
    /// its own (twice as many as the chat's messages, in a profile of PostgreSQL in the field bench).
    package func wait(after generation: Int, timeout: Duration, spacedFrom since: ContinuousClock.Instant, by spacing: Duration) async {
        await wait(after: generation, timeout: timeout)
        let earliest = since + spacing
        if ContinuousClock.now < earliest { try? await Task.sleep(until: earliest) }
    }

    /// How often a loop that found nothing looks again at most (``wait(after:timeout:spacedFrom:by:)``): a tenth of a
    /// second more before a dormant lane's first row or a broadcast is seen, only while other rows keep coming.
    package static let idleLookSpacing: Duration = .milliseconds(100)

    /// Returns when any of the signals moves past the generation given with it, or after `timeout`.
    package static func wait(for signals: [(QueueSignal, Int)], timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            for (signal, generation) in signals { group.addTask { await signal.waitForChange(after: generation) } }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForChange(after generation: Int) async {
        let id = state.withLockedValue { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLockedValue { state in
                    if state.generation != generation || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
