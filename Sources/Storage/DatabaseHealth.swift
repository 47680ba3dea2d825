package import Logging
import NIOConcurrencyHelpers
import Support

/// What the probe knows of the database, shared by every request: answered from memory, so a request while the
/// database is away is refused at once instead of waiting out a deadline, and `/readyz` costs no query.
///
/// Requests waiting for a pooled connection register here and are stopped when the database goes down.
package final class DatabaseHealth: Sendable {
    private struct Shared {
        var state: DatabaseHealthState
        var waiting: [Int: @Sendable () -> Void] = [:]
        var nextID = 0
        var settled: [CheckedContinuation<Void, Never>] = []
    }

    private let shared: NIOLockedValueBox<Shared>
    let logger: Logger

    package init(reminder: Duration = .seconds(60), logger: Logger) {
        self.shared = NIOLockedValueBox(Shared(state: DatabaseHealthState(reminder: reminder)))
        self.logger = logger
    }

    /// The last probe answered.
    package var isUp: Bool { shared.withLockedValue { $0.state.isUp } }

    /// Why the database is not up (for answers and `/readyz`), nil when it is.
    package var problem: String? {
        shared.withLockedValue { shared in
            switch shared.state.availability {
            case .up: nil
            case .starting: "no connection to the database yet"
            case .down(_, let reason): reason
            }
        }
    }

    /// Waits until the first probe has answered either way (requests that arrive while the process starts).
    package func waitUntilSettled() async {
        await withCheckedContinuation { continuation in
            let settled = shared.withLockedValue { shared in
                guard shared.state.availability == .starting else { return true }
                shared.settled.append(continuation)
                return false
            }
            if settled { continuation.resume() }
        }
    }

    /// Calls `stop` if the database goes down before ``remove(_:)``; returns the registration.
    func whenDown(_ stop: @escaping @Sendable () -> Void) -> Int {
        shared.withLockedValue { shared in
            shared.nextID += 1
            shared.waiting[shared.nextID] = stop
            return shared.nextID
        }
    }

    func remove(_ registration: Int) {
        _ = shared.withLockedValue { $0.waiting.removeValue(forKey: registration) }
    }

    func probeSucceeded() {
        let (action, settled) = shared.withLockedValue { shared in
            let action = shared.state.probeSucceeded(at: .now)
            defer { shared.settled = [] }
            return (action, shared.settled)
        }
        for continuation in settled { continuation.resume() }
        if case .cameBack(let downFor) = action {
            logger.notice("The database answers again (it was away for \(downFor.formatted)): serving requests")
        }
    }

    /// A probe failed, or a request found the connection gone: everyone waiting for a connection is stopped.
    func failed(_ reason: String) {
        let (action, stops, settled) = shared.withLockedValue { shared in
            let action = shared.state.probeFailed(reason: reason, at: .now)
            let stops = Array(shared.waiting.values)
            defer { shared.settled = [] }
            return (action, stops, shared.settled)
        }
        for continuation in settled { continuation.resume() }
        for stop in stops { stop() }
        switch action {
        case .none, .cameBack:
            break
        case .wentDown(let reason):
            logger.error("The database does not answer (\(reason)): requests get 503 until it is back")
        case .stillDown(let reason, let duration):
            logger.error("The database has not answered for \(duration.formatted) (\(reason))")
        }
    }
}
