import NIOConcurrencyHelpers
import Support

/// Connections open at once per client address, for `api_max_connections_per_ip`: a few thousand idle sockets from
/// one address must not use up the descriptors every other client needs.
final class ConnectionCounter: Sendable {
    let maximum: Int
    private let counts = NIOLockedValueBox([String: Int]())

    init(maximum: Int) { self.maximum = maximum }

    /// Counts a new connection from `key`; false (not counted) when that address already holds `maximum`.
    func open(_ key: String) -> Bool {
        guard maximum > 0 else { return true }
        return counts.withLockedValue { counts in
            let current = counts[key, default: 0]
            guard current < maximum else { return false }
            counts[key] = current + 1
            return true
        }
    }

    func close(_ key: String) {
        guard maximum > 0 else { return }
        counts.withLockedValue { counts in
            let remaining = counts[key, default: 1] - 1
            counts[key] = remaining > 0 ? remaining : nil
        }
    }

    var openCount: Int { counts.withLockedValue { $0.values.reduce(0, +) } }
}
