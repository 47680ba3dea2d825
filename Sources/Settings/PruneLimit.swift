import Support

/// The most users one feedback run may delete (`feedback_max_prune`): a number, or a share of the users with a
/// token (`10%`, the default). A run that would delete more deletes nothing and says why, unless `--force`: Apple
/// never reports a tenth of an app's devices gone in an hour, a misconfiguration can.
package enum PruneLimit: Sendable, Equatable, CustomStringConvertible {
    case count(Int)
    /// A fraction (0…1) of the users with a token.
    case share(Double)

    package static let `default` = PruneLimit.share(0.10)

    /// `250` or `10%`; nil when it is neither.
    package init?(parsing text: String) {
        let trimmed = text.trimmingWhitespace()
        if trimmed.hasSuffix("%") {
            guard let percent = Double(trimmed.dropLast()), percent >= 0, percent <= 100 else { return nil }
            self = .share(percent / 100)
        } else {
            guard let count = Int(trimmed), count >= 0 else { return nil }
            self = .count(count)
        }
    }

    /// The limit for a database holding `usersWithToken` users with a token (at least 1: one stale token may
    /// always go).
    package func limit(usersWithToken: Int) -> Int {
        switch self {
        case .count(let count): count
        case .share(let share): max(1, Int((Double(usersWithToken) * share).rounded(.down)))
        }
    }

    package var description: String {
        switch self {
        case .count(let count): "\(count)"
        case .share(let share): "\(Int((share * 100).rounded()))%"
        }
    }
}
