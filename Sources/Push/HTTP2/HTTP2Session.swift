import APNs
import NIOConcurrencyHelpers

/// One HTTP/2 connection's work, shared by its claimer, writer and reader: a pure ``State`` (tested without
/// sockets) behind a lock, changed only through ``update(_:)``, which wakes the tasks waiting for a change.
final class HTTP2Session: Sendable {
    /// Rows to send again, rows claimed ahead, the in-flight count and the stream limit, and every transition the
    /// connection's events cause.
    struct State: Equatable {
        /// Sent before anything else: unanswered, a refreshed token, left from the last connection.
        private(set) var retry: [QueuedNotification] = []
        /// Claimed ahead, waiting for a free stream.
        private(set) var ready: [QueuedNotification] = []
        private(set) var inFlight = 0
        /// Streams used at once: 1 until the server's SETTINGS say more, never above ``ceiling``; halved when requests
        /// time out (the server answers slower than that many allow), grown back by what is answered.
        private(set) var limit = 1
        /// What the server allows (SETTINGS_MAX_CONCURRENT_STREAMS), capped by `push_window`.
        private(set) var ceiling = 1
        private(set) var answered = 0
        /// Still taking new work (false after GOAWAY, a lost connection or shutdown).
        private(set) var open = true
        /// Closed because it had no work for `apns_connection_idle` (an extra connection; no backoff, no alarm).
        private(set) var closedIdle = false

        init(retry: [QueuedNotification] = []) { self.retry = retry }

        /// Rows claimed for this connection.
        mutating func claimed(_ rows: [QueuedNotification]) { ready += rows }

        /// A row to send first (a refreshed provider token).
        mutating func retryFirst(_ row: QueuedNotification) { retry.append(row) }

        /// No new work: GOAWAY or shutdown. What is in flight is still answered.
        mutating func stop() { open = false }

        /// No work for `apns_connection_idle` on an extra connection: it closes, to open again on demand.
        mutating func closeIdle() {
            closedIdle = true
            open = false
        }

        /// The connection ended; whether it was still taking work.
        mutating func lost() -> Bool {
            defer { open = false }
            return open
        }

        /// The next rows to write and marks them in flight: retries first, then claimed rows. Sent once an eighth of
        /// the streams allowed are free (or at once when nothing is in flight or retries wait), in pieces of at most
        /// an eighth (at least 64) per event-loop hop: a whole window written as one batch went out, was answered and
        /// came back as one cohort, each end handling all of it before the next could start (at RTT 50 ms one
        /// connection carried 0.73 of its streams per round trip; in pieces, 0.89).
        mutating func nextBatch(batchSize: Int) -> [QueuedNotification] {
            let free = max(0, limit - inFlight)
            let refill = min(batchSize, max(1, limit / 8))
            guard free > 0, free >= refill || inFlight == 0 || !retry.isEmpty else { return [] }
            let size = min(free, batchSize, max(limit / 8, 64))
            var batch = Array(retry.prefix(size))
            retry.removeFirst(batch.count)
            let more = min(size - batch.count, ready.count)
            batch += ready.prefix(more)
            ready.removeFirst(more)
            inFlight += batch.count
            return batch
        }

        /// Rows that were prepared but not written (they could never be sent, or the connection was gone).
        mutating func withdraw(_ count: Int) { inFlight -= count }

        /// The connection did not take `items`: they go first on the next connection, and this one stops.
        mutating func notTaken(_ items: [QueuedNotification]) {
            inFlight -= items.count
            retry += items
            open = false
        }

        mutating func answered(_ count: Int) {
            inFlight -= count
            answered += count
            if limit < ceiling { limit = min(ceiling, limit + max(1, count / 2)) }
        }

        /// Written, no answer within the request timeout: sent again, and half as many at once from now on (a
        /// window that times out whole would be resent whole forever). Returns the new limit.
        mutating func timedOut(_ items: [QueuedNotification]) -> Int {
            unanswered(items)
            limit = max(1, limit / 2)
            return limit
        }

        /// Written, not answered (timeout, reset, GOAWAY): sent again.
        mutating func unanswered(_ items: [QueuedNotification]) {
            inFlight -= items.count
            retry += items
        }

        /// The server's SETTINGS_MAX_CONCURRENT_STREAMS, capped by `window`; returns the new limit.
        mutating func allow(maxStreams: Int, window: Int) -> Int {
            ceiling = max(1, min(maxStreams, window))
            limit = ceiling
            return limit
        }

        /// Every stream this connection may use is busy (fewer than a quarter free) while rows wait for one: one
        /// connection carries no more, another would.
        var isSaturated: Bool {
            open && limit > 1 && limit - inFlight < max(1, limit / 4) && !(retry.isEmpty && ready.isEmpty)
        }

        /// Nothing in flight, nothing waiting.
        var isIdle: Bool { inFlight == 0 && retry.isEmpty && ready.isEmpty }

        /// Whether the claimer should claim more: fewer rows ready than a window's worth (or half a batch).
        func wantsClaim(batchSize: Int) -> Bool { open && ready.count < max(limit, batchSize / 2) }

        /// What goes to the next connection, oldest first.
        var unsent: [QueuedNotification] { (retry + ready).sorted { $0.messageID < $1.messageID } }
    }

    private let state: NIOLockedValueBox<State>
    /// Any change (answers, sends, claims).
    let wake = QueueSignal()
    /// The session stopped taking new work (GOAWAY, connection lost, shutdown).
    let closing = QueueSignal()

    init(carry: [QueuedNotification]) { state = NIOLockedValueBox(State(retry: carry)) }

    /// Changes the state and wakes whoever waits for it (and, when the session closes, whoever waits for that).
    func update<T>(_ body: (inout State) -> T) -> T { update(body, wakesIf: { _ in true }) }

    /// Changes the state and wakes the waiting tasks only when `wakes(result)`: the writer taking nothing must not
    /// wake itself (its wait would end at once, and it would spin).
    func update<T>(_ body: (inout State) -> T, wakesIf wakes: (T) -> Bool) -> T {
        let (result, closed) = state.withLockedValue { state in
            let wasOpen = state.open
            let result = body(&state)
            return (result, wasOpen && !state.open)
        }
        if closed || wakes(result) { wake.signal() }
        if closed { closing.signal() }
        return result
    }

    /// Reads the state (no change, no wake-up).
    func read<T>(_ body: (State) -> T) -> T { state.withLockedValue { body($0) } }

    var isOpen: Bool { read(\.open) }
}
