import NIOConcurrencyHelpers

/// Whether this daemon is draining a broadcast as fast as it can: its claims of broadcast rows come back full (a
/// backlog of them waits). Meanwhile the webhook deliverer holds back events younger than `webhook_broadcast_lag`, so
/// that the notifications have the machine first; once the backlog is gone (no full claim for ``lasting``) it POSTs
/// everything that waits. A broadcast paced by `push_broadcast_rate` never fills its claims: events flow as it drains.
package final class BroadcastPressure: Sendable {
    private let lastFullClaim = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
    /// How long after the last full claim of broadcast rows the drain still counts as under way.
    static let lasting: Duration = .seconds(2)

    package init() {}

    /// A claim came back with as many rows as it asked for, some of them a broadcast's.
    func fullClaim(at now: ContinuousClock.Instant = .now) { lastFullClaim.withLockedValue { $0 = now } }

    /// Whether a broadcast drained at full speed within the last ``lasting``.
    package func isDraining(at now: ContinuousClock.Instant = .now) -> Bool {
        lastFullClaim.withLockedValue { last in last.map { now - $0 < Self.lasting } ?? false }
    }
}
