/// Whether the database answers, as the probe last found it: a value that takes a probe's outcome and returns what
/// to announce, so a down database is logged once when it goes, once per `reminder` while it stays away, and once
/// when it is back (not once per request).
struct DatabaseHealthState: Sendable {
    enum Availability: Sendable, Equatable {
        /// No probe has answered yet (the process is starting).
        case starting
        case up
        case down(since: ContinuousClock.Instant, reason: String)
    }

    enum Action: Sendable, Equatable {
        case none
        /// It stopped answering: say so, and stop the requests waiting for a connection.
        case wentDown(reason: String)
        /// Still away (at most once per `reminder`).
        case stillDown(reason: String, for: Duration)
        /// It answers again after `downFor`.
        case cameBack(downFor: Duration)
    }

    private(set) var availability = Availability.starting
    private var lastAnnounced: ContinuousClock.Instant?
    let reminder: Duration

    init(reminder: Duration = .seconds(60)) {
        self.reminder = reminder
    }

    var isUp: Bool { availability == .up }

    mutating func probeSucceeded(at now: ContinuousClock.Instant) -> Action {
        switch availability {
        case .up:
            return .none
        case .starting:
            availability = .up
            return .none
        case .down(let since, _):
            availability = .up
            lastAnnounced = nil
            return .cameBack(downFor: since.duration(to: now))
        }
    }

    mutating func probeFailed(reason: String, at now: ContinuousClock.Instant) -> Action {
        switch availability {
        case .up, .starting:
            availability = .down(since: now, reason: reason)
            lastAnnounced = now
            return .wentDown(reason: reason)
        case .down(let since, _):
            availability = .down(since: since, reason: reason)
            if let last = lastAnnounced, last.duration(to: now) < reminder { return .none }
            lastAnnounced = now
            return .stillDown(reason: reason, for: since.duration(to: now))
        }
    }
}
