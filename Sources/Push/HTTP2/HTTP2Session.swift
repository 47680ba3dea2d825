import APNs
import NIOConcurrencyHelpers

/// One connection's work: rows to send again, rows claimed ahead, the in-flight count and the stream limit.
final class HTTP2Session: Sendable {
    struct State {
        /// Sent before anything else: unanswered, a refreshed token, left from the last connection.
        var retry: [QueuedNotification] = []
        /// Claimed ahead, waiting for a free stream.
        var ready: [QueuedNotification] = []
        var inFlight = 0
        var limit = 1
        var answered = 0
        var open = true
    }

    let state: NIOLockedValueBox<State>
    /// Any change (answers, sends, claims).
    let wake = QueueSignal()
    /// The session stopped taking new work (GOAWAY, connection lost, shutdown).
    let closing = QueueSignal()

    init(carry: [QueuedNotification]) { state = NIOLockedValueBox(State(retry: carry)) }

    func update<T>(_ body: (inout State) -> T) -> T {
        let (result, closed) = state.withLockedValue { state in
            let wasOpen = state.open
            let result = body(&state)
            return (result, wasOpen && !state.open)
        }
        wake.signal()
        if closed { closing.signal() }
        return result
    }
}
