import NIOConcurrencyHelpers
import Support

/// The `push_broadcast_rate` budget: at most `perSecond` broadcast rows, granted in shares of at most a tenth of a
/// second's worth so that they go out evenly. A value type, tested apart from the daemon; ``BroadcastRate`` shares
/// one between a daemon's connections.
struct RowBudget: Sendable, Equatable {
    private(set) var perSecond: Int
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

    /// From `now` on, `perSecond` rows a second (what accrued until now at the old pace stays, up to the new burst).
    mutating func pace(_ perSecond: Int, now: ContinuousClock.Instant) {
        precondition(perSecond > 0)
        guard perSecond != self.perSecond else { return }
        refill(now)
        self.perSecond = perSecond
        available = min(burst, available)
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

/// A daemon's broadcast pace, shared by all its connections (every app, APNs and FCM): `push_broadcast_rate` when set,
/// and, while chat waits (``ChatPriority``, `push_chat_target`), the pace that leaves chat the machine; none otherwise.
final class BroadcastRate: Sendable {
    private struct State {
        /// `push_broadcast_rate` (nil: none).
        let configured: Int?
        var priority: ChatPriority?
        /// The budget at the pace in force (nil: none, every row granted).
        var budget: RowBudget?

        /// The pace now, applied to the budget.
        mutating func budget(now: ContinuousClock.Instant) -> RowBudget? {
            let chat = priority?.pace(now: now).map { Int($0.rounded()) }
            guard let pace = [configured, chat].compactMap({ $0 }).min() else {
                budget = nil
                return nil
            }
            if budget == nil { budget = RowBudget(perSecond: pace, now: now) } else { budget?.pace(pace, now: now) }
            return budget
        }
    }

    private let state: NIOLockedValueBox<State>

    /// `perSecond`: `push_broadcast_rate` (nil: none); `chatTarget`: `push_chat_target` (nil: broadcasts never yield).
    init(perSecond: Int?, chatTarget: Duration?, now: ContinuousClock.Instant = .now) {
        state = NIOLockedValueBox(
            State(
                configured: perSecond,
                priority: chatTarget.map { ChatPriority(target: $0, floor: ChatPriority.defaultFloor, now: now) }
            )
        )
    }

    /// Up to `wanted` rows, or none until `minimum` are available.
    func take(upTo wanted: Int, atLeast minimum: Int = 1) -> Int {
        state.withLockedValue { state in
            let now = ContinuousClock.now
            let granted = state.budget(now: now) == nil ? wanted : state.budget!.take(upTo: wanted, atLeast: minimum, now: now)
            state.priority?.granted(granted, now: now)
            return granted
        }
    }

    func giveBack(_ rows: Int) {
        state.withLockedValue { state in
            state.budget?.giveBack(rows)
            state.priority?.granted(-rows, now: .now)
        }
    }

    /// A whole share of `wanted` rows (at most a burst; `wanted` without a pace).
    func share(of wanted: Int) -> Int { state.withLockedValue { $0.budget(now: .now)?.share(of: wanted) ?? max(1, wanted) } }

    /// How long until `rows` rows (at most a burst) can be granted.
    func wait(for rows: Int) -> Duration { state.withLockedValue { $0.budget(now: .now)?.wait(for: rows, now: .now) ?? .zero } }

    /// An interactive claim that returned rows took `duration` (``ChatPriority``).
    func chatClaimed(taking duration: Duration) {
        state.withLockedValue { $0.priority?.chatClaimed(taking: duration, now: .now) }
    }

    /// The broadcast's pace now, rows/s (nil: none), for the figures and the log.
    var pace: Int? { state.withLockedValue { $0.budget(now: .now)?.perSecond } }
}
