import NIOConcurrencyHelpers

/// When the HTTP/2 daemon opens another connection and when it closes one: connection 1 is always open; connection
/// k opens once every open connection below it has had all its streams busy with rows waiting for `after` (the
/// streams are saturated: one connection carries at most MAX_CONCURRENT_STREAMS per round trip), up to
/// `apns_connections`; an extra connection closes after `apns_connection_idle` without work.
///
/// The decisions are a pure ``State`` (tested without sockets); ``ConnectionDemand`` shares it between the workers.
final class ConnectionDemand: Sendable {
    struct State: Equatable {
        /// Since when each open connection has been saturated (nil: it is not).
        var saturatedSince: [Int: ContinuousClock.Instant?] = [:]

        mutating func opened(_ index: Int) { saturatedSince[index] = .some(nil) }
        mutating func closed(_ index: Int) { saturatedSince[index] = nil }

        /// Whether the connection became saturated or stopped being so (what a dormant connection waits for).
        @discardableResult
        mutating func report(_ index: Int, saturated: Bool, now: ContinuousClock.Instant) -> Bool {
            guard let since = saturatedSince[index] else { return false }
            if !saturated, since != nil {
                saturatedSince[index] = .some(nil)
                return true
            } else if saturated, since == nil {
                saturatedSince[index] = .some(now)
                return true
            }
            return false
        }

        /// When connection `index` (2…) should open if nothing changes: it is the next one (every connection below it
        /// is open) and all of those have been saturated for `after`. Nil while one of them is not saturated.
        func opensAt(_ index: Int, after: Duration) -> ContinuousClock.Instant? {
            guard index > 1, saturatedSince[index] == nil else { return nil }
            var latest: ContinuousClock.Instant?
            for lower in 1..<index {
                guard let entry = saturatedSince[lower], let since = entry else { return nil }
                latest = max(latest ?? since, since)
            }
            return latest.map { $0 + after }
        }

        /// Whether connection `index` should open now (``opensAt(_:after:)`` has come).
        func wants(_ index: Int, now: ContinuousClock.Instant, after: Duration) -> Bool {
            opensAt(index, after: after).map { $0 <= now } ?? false
        }

        var openCount: Int { saturatedSince.count }
    }

    private let state = NIOLockedValueBox(State())
    /// How long the open connections must stay saturated before another opens.
    let after: Duration
    /// Signalled when a connection opens, closes, becomes saturated or stops being so: a dormant connection waits
    /// for it (and for the time ``opensAt(_:)`` names), never polls.
    let changed = QueueSignal()

    init(after: Duration = .milliseconds(200)) { self.after = after }

    func opened(_ index: Int) {
        state.withLockedValue { $0.opened(index) }
        changed.signal()
    }

    func closed(_ index: Int) {
        state.withLockedValue { $0.closed(index) }
        changed.signal()
    }

    func report(_ index: Int, saturated: Bool) {
        let now = ContinuousClock.now
        if state.withLockedValue({ $0.report(index, saturated: saturated, now: now) }) { changed.signal() }
    }

    /// When connection `index` should open if nothing changes (nil: not while things stay as they are).
    func opensAt(_ index: Int) -> ContinuousClock.Instant? {
        state.withLockedValue { $0.opensAt(index, after: after) }
    }

    var openCount: Int { state.withLockedValue { $0.openCount } }
}
