import NIOConcurrencyHelpers

/// Hashes of keys that authenticated lately: such a key passes the failed-authentication bucket without waiting for
/// it, so made-up keys from an address (or its neighbours behind one NAT) cannot lock out a valid key sent from there.
/// It is still looked up on every request, so a revoked key stops at once. Bounded: past `capacity` the entries that
/// ran out go, then the oldest half.
package final class KnownKeys: Sendable {
    private let lifetime: Duration
    private let capacity: Int
    private let entries = NIOLockedValueBox([String: ContinuousClock.Instant]())

    package init(lifetime: Duration = .seconds(600), capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    package func contains(_ hash: String, now: ContinuousClock.Instant = .now) -> Bool {
        entries.withLockedValue { entries in
            guard let expiry = entries[hash] else { return false }
            guard expiry > now else {
                entries[hash] = nil
                return false
            }
            return true
        }
    }

    package func insert(_ hash: String, now: ContinuousClock.Instant = .now) {
        entries.withLockedValue { entries in
            if entries[hash] == nil, entries.count >= capacity {
                entries = entries.filter { $0.value > now }
                if entries.count >= capacity {
                    let kept = entries.sorted { $0.value > $1.value }.prefix(capacity / 2)
                    entries = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
                }
            }
            entries[hash] = now + lifetime
        }
    }
}
