import NIOConcurrencyHelpers
import Support

/// The `push_broadcast_rate` budget: at most `perSecond` broadcast rows, granted in shares of at most a tenth of a
/// second's worth so that they go out evenly. A value type, tested apart from the daemon; ``BroadcastRate`` shares
/// one between a daemon's connections.
struct RowBudget: Sendable, Equatable {
    let perSecond: Int
    private(set) var available: Double
    private var updated: ContinuousClock.Instant

    /// The most rows granted at once: a tenth of a second's worth (at least one).
    var burst: Double { max(1, Double(perSecond) / 10) }

    init(perSecond: Int, now: ContinuousClock.Instant) {
        precondition(perSecond > 0)
        self.perSecond = perSecond
        self.updated = now
        self.available = max(1, Double(perSecond) / 10)
    }

    /// Grants up to `wanted` rows now, or none when fewer than `minimum` (at most a burst) are available: a claim
    /// for broadcast rows only waits for a whole share instead of claiming a trickle, a statement per row.
    mutating func take(upTo wanted: Int, atLeast minimum: Int = 1, now: ContinuousClock.Instant) -> Int {
        refill(now)
        let granted = max(0, min(wanted, Int(available)))
        guard granted >= share(of: minimum) else { return 0 }
        available -= Double(granted)
        return granted
    }

    /// The most a claim asking for `wanted` rows waits for: a whole share (`wanted`, at most a burst).
    func share(of wanted: Int) -> Int { min(max(1, wanted), Int(burst)) }

    /// Returns rows granted but not used (the claim found fewer).
    mutating func giveBack(_ rows: Int) {
        available = min(burst, available + Double(max(0, rows)))
    }

    /// How long until `rows` rows (at most a burst) can be granted.
    func wait(for rows: Int = 1, now: ContinuousClock.Instant) -> Duration {
        var budget = self
        budget.refill(now)
        let missing = Double(share(of: rows)) - budget.available
        guard missing > 0 else { return .zero }
        return .nanoseconds(Int64((missing / Double(perSecond) * 1e9).rounded(.up)))
    }

    private mutating func refill(_ now: ContinuousClock.Instant) {
        guard now > updated else { return }
        available = min(burst, available + updated.duration(to: now).seconds * Double(perSecond))
        updated = now
    }
}

/// A daemon's broadcast budget, shared by all its connections (every app, APNs and FCM).
final class BroadcastRate: Sendable {
    private let budget: NIOLockedValueBox<RowBudget>

    init(perSecond: Int) {
        budget = NIOLockedValueBox(RowBudget(perSecond: perSecond, now: .now))
    }

    /// Up to `wanted` rows, or none until `minimum` are available.
    func take(upTo wanted: Int, atLeast minimum: Int = 1) -> Int {
        budget.withLockedValue { $0.take(upTo: wanted, atLeast: minimum, now: .now) }
    }
    func giveBack(_ rows: Int) { budget.withLockedValue { $0.giveBack(rows) } }
    /// A whole share of `wanted` rows (at most a burst).
    func share(of wanted: Int) -> Int { budget.withLockedValue { $0.share(of: wanted) } }
    /// How long until `rows` rows (at most a burst) can be granted.
    func wait(for rows: Int) -> Duration { budget.withLockedValue { $0.wait(for: rows, now: .now) } }
}
