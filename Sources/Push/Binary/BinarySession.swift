import APNs
import NIOConcurrencyHelpers
import Observability
import Settings
import Storage
import Support

/// What one gateway connection holds, shared by its writer and reader: the sent window and the rows waiting to be
/// written. Once the reader sees the connection end, the session stops: nothing more settles or is written.
final class BinarySession: Sendable {
    private struct State {
        var window: SentWindow<QueuedNotification>
        var pending: [QueuedNotification]
        var stopped = false
        var delivered = 0
        /// How many notifications may be unsettled at once: grows with every settled one (slow start after a
        /// connection dropped without an error response), up to the window's capacity.
        var limit: Int
    }

    private let state: NIOLockedValueBox<State>
    private let alarm: GatewayAlarm

    init(capacity: Int, limit: Int, carry: [QueuedNotification], alarm: GatewayAlarm) {
        self.alarm = alarm
        state = NIOLockedValueBox(State(window: SentWindow(capacity: capacity), pending: carry, limit: max(1, min(limit, capacity))))
    }

    /// Stops the session: called as soon as an error response arrives or the connection ends.
    func stop() { state.withLockedValue { $0.stopped = true } }

    var isStopped: Bool { state.withLockedValue { $0.stopped } }

    /// Removes the notifications written before `instant`: accepted.
    func settle(writtenBefore instant: ContinuousClock.Instant) -> [QueuedNotification] {
        state.withLockedValue { state in
            // Checked under the lock: once the gateway has spoken, nothing settles by time any more.
            guard !state.stopped, !alarm.isRaised else { return [] }
            let settled = state.window.removeSettled(writtenBefore: instant)
            state.delivered += settled.count
            state.limit = min(state.window.capacity, state.limit + settled.count)
            return settled
        }
    }

    /// How many more notifications may be written now.
    var freeSpace: Int { state.withLockedValue { max(0, min($0.window.freeSpace, $0.limit - $0.window.count)) } }
    var limit: Int { state.withLockedValue { $0.limit } }
    var oldestWrite: ContinuousClock.Instant? { state.withLockedValue { $0.window.oldestWrite } }
    var delivered: Int { state.withLockedValue { $0.delivered } }
    var inFlightCount: Int { state.withLockedValue { $0.window.count } }

    /// Takes up to `limit` rows waiting to be (re)sent.
    func takePending(limit: Int) -> [QueuedNotification] {
        state.withLockedValue { state in
            let taken = Array(state.pending.prefix(limit))
            state.pending.removeFirst(taken.count)
            return taken
        }
    }

    /// Rows to write on this connection or, if it has ended, the next.
    func addPending(_ items: [QueuedNotification]) {
        state.withLockedValue { $0.pending.append(contentsOf: items) }
    }

    /// Records rows about to be written; if the session already stopped they wait for the next connection instead.
    func append(_ items: [QueuedNotification], at instant: ContinuousClock.Instant) -> Bool {
        state.withLockedValue { state in
            guard !state.stopped else {
                state.pending.append(contentsOf: items)
                return false
            }
            for item in items { state.window.append(item, identifier: item.wireIdentifier, writtenAt: instant) }
            return true
        }
    }

    /// After a write completed: its notifications wait for an error response from now on.
    func restampLast(_ count: Int, at instant: ContinuousClock.Instant) {
        state.withLockedValue { state in
            guard !state.stopped else { return }
            state.window.restampLast(count, at: instant)
        }
    }

    /// Settles the window by an error response; returns the resolution and the unwritten rows.
    func resolve(_ response: BinaryErrorResponse) -> (SentWindow<QueuedNotification>.Resolution, [QueuedNotification]) {
        state.withLockedValue { state in
            state.stopped = true
            let resolution = state.window.resolve(response)
            state.delivered += resolution.accepted.count
            let pending = state.pending
            state.pending = []
            return (resolution, pending)
        }
    }

    /// Empties the session: the window (fate unknown) and the unwritten rows.
    func takeAll() -> (window: [QueuedNotification], pending: [QueuedNotification]) {
        state.withLockedValue { state in
            state.stopped = true
            let pending = state.pending
            state.pending = []
            return (state.window.removeAllItems(), pending)
        }
    }
}
