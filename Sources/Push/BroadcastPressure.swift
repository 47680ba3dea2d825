import NIOConcurrencyHelpers

/// Whether this daemon is draining a broadcast as fast as it can: its claims of broadcast rows come back full (a
/// backlog of them waits), or a connection writes a broadcast's rows with every stream busy and more rows waiting (a
/// claim grown large while the writer waited for rows holds seconds of sending after the last full claim). Meanwhile the
/// webhook deliverer holds back events younger than `webhook_broadcast_lag`, so that the notifications have the
/// machine first; once neither has happened for ``lasting`` it POSTs everything that waits. A broadcast paced by
/// `push_broadcast_rate` neither fills its claims nor its connections: events flow as it drains.
package final class BroadcastPressure: Sendable {
    private let lastFullClaim = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
    /// How long after the last sign of it (a full claim, a saturated connection) the drain still counts as under way.
    static let lasting: Duration = .seconds(2)

    package init() {}

    /// A claim came back with as many rows as it asked for, some of them a broadcast's; or a connection wrote a
    /// broadcast's rows with every stream busy and more rows waiting.
    func atFullSpeed(at now: ContinuousClock.Instant = .now) { lastFullClaim.withLockedValue { $0 = now } }

    /// Whether a broadcast drained at full speed within the last ``lasting``.
    package func isDraining(at now: ContinuousClock.Instant = .now) -> Bool {
        lastFullClaim.withLockedValue { last in last.map { now - $0 < Self.lasting } ?? false }
    }
}
