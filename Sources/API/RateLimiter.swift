import NIOConcurrencyHelpers
import Support

/// Token buckets by key (client address, udid): each key may spend `burst` at once and regains `rate` per second;
/// a request costs 1, a message the notifications it queues.
///
/// Memory stays bounded however many keys pass by, and the work per call stays constant under a flood of new keys:
/// keys are kept in the order they were last used, and each call looks at no more than two of the oldest, dropping
/// those that have refilled (they behave like new ones) or, past `maximumKeys`, the least recently used.
package final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
        /// The touch this bucket's newest entry in `order` records.
        var stamp: UInt64
    }

    private struct State {
        var buckets: [String: Bucket] = [:]
        /// Touches, oldest first, from `head` on; an entry whose stamp is not its bucket's is stale.
        var order: [(key: String, stamp: UInt64)] = []
        var head = 0
        var nextStamp: UInt64 = 0
    }

    /// Tokens per second regained; 0 turns the limiter off.
    package let rate: Double
    /// Tokens available at once.
    package let burst: Double
    private let maximumKeys: Int
    private let state = NIOLockedValueBox(State())

    package init(rate: Double, burst: Double, maximumKeys: Int = 100_000) {
        self.rate = rate
        self.burst = max(1, burst)
        self.maximumKeys = maximumKeys
    }

    package var isEnabled: Bool { rate > 0 }

    /// Takes `cost` tokens for `key`: `nil` when allowed (taken), else how long until that many are back (nothing
    /// taken). A cost above `burst` can never be paid at once: it waits as long as a full bucket would take.
    package func take(_ key: String, cost: Double = 1, now: ContinuousClock.Instant = .now) -> Duration? {
        guard isEnabled else { return nil }
        return state.withLockedValue { state in
            var bucket = refilled(state.buckets[key], now: now)
            defer { touch(&state, key, bucket, now: now) }
            guard bucket.tokens >= cost else {
                let missing = min(cost, burst) - bucket.tokens
                return .milliseconds(max(1, Int64((max(missing, 0) / rate * 1000).rounded(.up))))
            }
            bucket.tokens -= cost
            return nil
        }
    }

    /// Takes every whole token `key` has now (a reservation: give back what is not used with ``refund(_:_:now:)``).
    package func takeAll(_ key: String, now: ContinuousClock.Instant = .now) -> Int {
        guard isEnabled else { return .max }
        return state.withLockedValue { state in
            var bucket = refilled(state.buckets[key], now: now)
            let taken = max(0, Int(bucket.tokens.rounded(.down)))
            bucket.tokens -= Double(taken)
            touch(&state, key, bucket, now: now)
            return taken
        }
    }

    /// How long until `key` holds `count` tokens again (zero when it does now).
    package func wait(_ key: String, for count: Int, now: ContinuousClock.Instant = .now) -> Duration {
        guard isEnabled else { return .zero }
        let tokens = state.withLockedValue { refilled($0.buckets[key], now: now).tokens }
        let missing = min(Double(count), burst) - tokens
        return missing <= 0 ? .zero : .milliseconds(Int64((missing / rate * 1000).rounded(.up)))
    }

    /// Gives back `amount` tokens taken for `key` and not used (never above `burst`).
    package func refund(_ key: String, _ amount: Double, now: ContinuousClock.Instant = .now) {
        guard isEnabled, amount > 0 else { return }
        state.withLockedValue { state in
            var bucket = refilled(state.buckets[key], now: now)
            bucket.tokens = min(burst, bucket.tokens + amount)
            touch(&state, key, bucket, now: now)
        }
    }

    /// How many keys are kept (for tests of the bound).
    var keyCount: Int { state.withLockedValue { $0.buckets.count } }

    private func refilled(_ bucket: Bucket?, now: ContinuousClock.Instant) -> Bucket {
        guard var bucket else { return Bucket(tokens: burst, updated: now, stamp: 0) }
        bucket.tokens = min(burst, bucket.tokens + max(0, bucket.updated.duration(to: now).seconds) * rate)
        bucket.updated = now
        return bucket
    }

    /// Stores `bucket` as the newest use of `key`, then forgets at most two old keys.
    private func touch(_ state: inout State, _ key: String, _ bucket: Bucket, now: ContinuousClock.Instant) {
        var bucket = bucket
        state.nextStamp += 1
        bucket.stamp = state.nextStamp
        state.buckets[key] = bucket
        state.order.append((key, bucket.stamp))
        let refillTime = Duration.milliseconds(Int64(burst / rate * 1000) + 1)
        for _ in 0..<2 where state.head < state.order.count {
            let (oldKey, stamp) = state.order[state.head]
            if let old = state.buckets[oldKey], old.stamp == stamp {
                let idle = old.updated.duration(to: now) >= refillTime
                guard idle || state.buckets.count > maximumKeys else { break }
                state.buckets[oldKey] = nil
            }
            state.head += 1
        }
        if state.head > 1024 && state.head * 2 > state.order.count {
            state.order.removeFirst(state.head)
            state.head = 0
        }
    }
}
