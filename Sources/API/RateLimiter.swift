import NIOConcurrencyHelpers
import Observability
import Settings
import Storage
import Support

/// Token buckets by key (client address, udid): each key may spend `burst` requests at once and regains `rate`
/// per second. Idle, full buckets are dropped so memory stays bounded however many keys pass by.
public final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    /// Requests per second regained; 0 turns the limiter off.
    public let rate: Double
    /// Requests allowed at once.
    public let burst: Double
    private let maximumKeys: Int
    private let buckets = NIOLockedValueBox([String: Bucket]())

    public init(rate: Double, burst: Double, maximumKeys: Int = 100_000) {
        self.rate = rate
        self.burst = max(1, burst)
        self.maximumKeys = maximumKeys
    }

    public var isEnabled: Bool { rate > 0 }

    /// Takes one token for `key`: `nil` when allowed, else how long until one is available.
    public func take(_ key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        guard isEnabled else { return nil }
        return buckets.withLockedValue { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            let elapsed = bucket.updated.duration(to: now)
            let seconds = elapsed.seconds
            bucket.tokens = min(burst, bucket.tokens + max(0, seconds) * rate)
            bucket.updated = now
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return .milliseconds(Int64(((1 - bucket.tokens) / rate * 1000).rounded(.up)))
            }
            bucket.tokens -= 1
            buckets[key] = bucket
            if buckets.count > maximumKeys { prune(&buckets, now: now) }
            return nil
        }
    }

    /// Drops buckets that have refilled completely (they behave like new ones).
    private func prune(_ buckets: inout [String: Bucket], now: ContinuousClock.Instant) {
        let refill = Duration.milliseconds(Int64(burst / rate * 1000) + 1)
        buckets = buckets.filter { $0.value.updated.duration(to: now) < refill }
    }
}
