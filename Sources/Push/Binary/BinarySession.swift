import APNs
import NIOConcurrencyHelpers

/// What one gateway connection holds, shared by its writer and reader: a ``BinarySessionState`` behind a lock. Once
/// the reader sees the connection end, the session stops: nothing more settles or is written.
final class BinarySession: Sendable {
    private let state: NIOLockedValueBox<BinarySessionState>
    private let alarm: GatewayAlarm

    init(capacity: Int, limit: Int, carry: [QueuedNotification], alarm: GatewayAlarm) {
        self.alarm = alarm
        state = NIOLockedValueBox(BinarySessionState(capacity: capacity, limit: limit, carry: carry))
    }

    func stop() { state.withLockedValue { $0.stop() } }
    var isStopped: Bool { state.withLockedValue { $0.stopped } }

    /// Removes the notifications written before `instant`: accepted (unless the gateway has spoken since).
    func settle(writtenBefore instant: ContinuousClock.Instant) -> [QueuedNotification] {
        // Checked under the lock: once the gateway has spoken, nothing settles by time any more.
        state.withLockedValue { $0.settle(writtenBefore: instant, alarmRaised: alarm.isRaised) }
    }

    var freeSpace: Int { state.withLockedValue { $0.freeSpace } }
    var limit: Int { state.withLockedValue { $0.limit } }
    var oldestWrite: ContinuousClock.Instant? { state.withLockedValue { $0.oldestWrite } }
    var delivered: Int { state.withLockedValue { $0.delivered } }
    var inFlightCount: Int { state.withLockedValue { $0.inFlightCount } }

    func takePending(limit: Int) -> [QueuedNotification] { state.withLockedValue { $0.takePending(limit: limit) } }
    func addPending(_ items: [QueuedNotification]) { state.withLockedValue { $0.addPending(items) } }

    func append(_ items: [QueuedNotification], at instant: ContinuousClock.Instant) -> Bool {
        state.withLockedValue { $0.append(items, at: instant) }
    }

    func restampLast(_ count: Int, at instant: ContinuousClock.Instant) {
        state.withLockedValue { $0.restampLast(count, at: instant) }
    }

    /// Settles everything by how the connection ended, and empties the session.
    func end(_ end: BinarySessionState.End) -> BinarySessionState.Settlement { state.withLockedValue { $0.end(end) } }
}
