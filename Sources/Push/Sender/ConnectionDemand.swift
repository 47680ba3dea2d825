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

        mutating func report(_ index: Int, saturated: Bool, now: ContinuousClock.Instant) {
            guard let since = saturatedSince[index] else { return }
            if !saturated {
                saturatedSince[index] = .some(nil)
            } else if since == nil {
                saturatedSince[index] = .some(now)
            }
        }

        /// Whether connection `index` (2…) should open now: it is the next one (every connection below it is open)
        /// and all of those have been saturated for at least `after`.
        func wants(_ index: Int, now: ContinuousClock.Instant, after: Duration) -> Bool {
            guard index > 1, saturatedSince[index] == nil else { return false }
            for lower in 1..<index {
                guard let entry = saturatedSince[lower], let since = entry, since.duration(to: now) >= after else { return false }
            }
            return true
        }

        var openCount: Int { saturatedSince.count }
    }

    private let state = NIOLockedValueBox(State())
    /// How long the open connections must stay saturated before another opens.
    let after: Duration

    init(after: Duration = .milliseconds(200)) { self.after = after }

    func opened(_ index: Int) { state.withLockedValue { $0.opened(index) } }
    func closed(_ index: Int) { state.withLockedValue { $0.closed(index) } }

    func report(_ index: Int, saturated: Bool) {
        let now = ContinuousClock.now
        state.withLockedValue { $0.report(index, saturated: saturated, now: now) }
    }

    func wants(_ index: Int) -> Bool {
        let now = ContinuousClock.now
        return state.withLockedValue { $0.wants(index, now: now, after: after) }
    }

    var openCount: Int { state.withLockedValue { $0.openCount } }
}
