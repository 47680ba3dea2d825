import Metrics
import NIOConcurrencyHelpers

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
    /// `pushchat_api_connections`: the connections open now (how close the server is to `api_max_connections`).
    private let gauge: Meter?

    init(maximum: Int, maximumTotal: Int = 0, gauge: Meter? = nil) {
        self.maximum = maximum
        self.maximumTotal = maximumTotal
        self.gauge = gauge
    }

    enum Refusal: Equatable {
        case address
        case total
    }

    /// Counts a new connection, from `key` (nil: not limited per address, e.g. a trusted proxy); the limit it would
    /// pass when refused (then nothing is counted).
    func open(_ key: String?) -> Refusal? {
        let (refusal, total) = counts.withLockedValue { counts -> (Refusal?, Int) in
            guard maximumTotal == 0 || counts.total < maximumTotal else { return (.total, counts.total) }
            if let key, maximum > 0 {
                let current = counts.byKey[key, default: 0]
                guard current < maximum else { return (.address, counts.total) }
                counts.byKey[key] = current + 1
            }
            counts.total += 1
            return (nil, counts.total)
        }
        if refusal == nil { gauge?.set(total) }
        return refusal
    }

    func close(_ key: String?) {
        let total = counts.withLockedValue { counts in
            counts.total = max(0, counts.total - 1)
            if let key, maximum > 0 {
                let remaining = counts.byKey[key, default: 1] - 1
                counts.byKey[key] = remaining > 0 ? remaining : nil
            }
            return counts.total
        }
        gauge?.set(total)
    }

    var openCount: Int { counts.withLockedValue { $0.total } }
}
