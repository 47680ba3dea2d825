/// Tells a misconfigured provider from a few bad tokens. APNs answers `400 BadDeviceToken` or
/// `DeviceTokenNotForTopic` (binary: status 8) for a token that is not valid *for this topic and environment*: a
/// handful among many answers are stale tokens; most of the recent answers mean sandbox tokens sent to production,
/// or the wrong bundle id. Deleting users on those answers would turn one configuration slip into losing every user,
/// so they only fail their notification, and this window raises the alarm instead.
///
/// A pure value: fed with counts of answers, it says when the alarm goes up or down.
package struct WrongEnvironmentWindow: Sendable, Equatable {
    /// How many recent answers count.
    package let size: Int
    /// At least this many answers before it judges.
    package let minimum: Int
    /// The share of wrong-environment answers that raises the alarm (it falls below half of it).
    package let threshold: Double
    /// The last answers, oldest first: true for a wrong-environment answer (run-length encoded).
    private var runs: [(wrong: Bool, count: Int)] = []
    private var total = 0
    private var wrong = 0
    package private(set) var isRaised = false

    package init(size: Int = 200, minimum: Int = 20, threshold: Double = 0.8) {
        self.size = size
        self.minimum = minimum
        self.threshold = threshold
    }

    package enum Change: Sendable, Equatable { case raised, cleared }

    /// Records `count` answers; returns a change of the alarm, if any.
    package mutating func record(wrong isWrong: Bool, count: Int = 1) -> Change? {
        guard count > 0 else { return nil }
        if let last = runs.last, last.wrong == isWrong {
            runs[runs.count - 1].count += count
        } else {
            runs.append((isWrong, count))
        }
        total += count
        if isWrong { wrong += count }
        while total > size, !runs.isEmpty {
            let excess = min(total - size, runs[0].count)
            runs[0].count -= excess
            total -= excess
            if runs[0].wrong { wrong -= excess }
            if runs[0].count == 0 { runs.removeFirst() }
        }
        let share = total == 0 ? 0 : Double(wrong) / Double(total)
        if !isRaised, total >= minimum, share >= threshold {
            isRaised = true
            return .raised
        }
        if isRaised, share < threshold / 2 {
            isRaised = false
            return .cleared
        }
        return nil
    }

    /// The share of wrong-environment answers among the recent ones.
    package var share: Double { total == 0 ? 0 : Double(wrong) / Double(total) }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.total == rhs.total && lhs.wrong == rhs.wrong && lhs.isRaised == rhs.isRaised
            && lhs.runs.map(\.wrong) == rhs.runs.map(\.wrong) && lhs.runs.map(\.count) == rhs.runs.map(\.count)
    }
}
