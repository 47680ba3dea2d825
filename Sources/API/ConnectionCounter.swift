import NIOConcurrencyHelpers
import Support

/// Connections open at once per client address (`api_max_connections_per_ip`) and in all (`api_max_connections`): a
/// few thousand idle sockets from one address, or from many, must not use up the descriptors every other client needs.
final class ConnectionCounter: Sendable {
    /// Per address (0: no limit).
    let maximum: Int
    /// From every address together, trusted proxies included (0: no limit).
    let maximumTotal: Int
    private struct Counts {
        var byKey: [String: Int] = [:]
        var total = 0
    }

    private let counts = NIOLockedValueBox(Counts())
    /// Refused connections are logged a line a second per kind, with how many were left out.
    let refusals = RefusalSampler()

    init(maximum: Int, maximumTotal: Int = 0) {
        self.maximum = maximum
        self.maximumTotal = maximumTotal
    }

    enum Refusal: Equatable {
        case address
        case total
    }

    /// Counts a new connection, from `key` (nil: not limited per address, e.g. a trusted proxy); the limit it would
    /// pass when refused (then nothing is counted).
    func open(_ key: String?) -> Refusal? {
        counts.withLockedValue { counts in
            guard maximumTotal == 0 || counts.total < maximumTotal else { return .total }
            if let key, maximum > 0 {
                let current = counts.byKey[key, default: 0]
                guard current < maximum else { return .address }
                counts.byKey[key] = current + 1
            }
            counts.total += 1
            return nil
        }
    }

    func close(_ key: String?) {
        counts.withLockedValue { counts in
            counts.total = max(0, counts.total - 1)
            guard let key, maximum > 0 else { return }
            let remaining = counts.byKey[key, default: 1] - 1
            counts.byKey[key] = remaining > 0 ? remaining : nil
        }
    }

    var openCount: Int { counts.withLockedValue { $0.total } }
}
