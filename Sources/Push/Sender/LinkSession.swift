import APNs
import NIOConcurrencyHelpers

/// One connection's work, shared by the driver's claimer, writer and reader (for every destination): a pure
/// ``State`` (tested without sockets) behind a lock, changed only through ``update(_:)``, which wakes the tasks
/// waiting for a change.
final class LinkSession: Sendable {
    /// Rows to send again, rows claimed ahead, the in-flight count and limit, and every transition the connection's
    /// events cause.
    struct State: Equatable {
        /// Sent before anything else: unanswered, a refreshed token, left from the last connection.
        private(set) var retry: [QueuedNotification] = []
        /// Claimed ahead, waiting for a free stream.
        private(set) var ready: [QueuedNotification] = []
        private(set) var inFlight = 0
        /// Requests in flight at once: never above ``ceiling``; halved when requests time out (the far end answers
        /// slower than that many allow), grown back by what is answered (slow start after a connection dropped).
        private(set) var limit = 1
        /// What the far end allows (the link's initial window, then HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS), capped
        /// by `push_window`.
        private(set) var ceiling = 1
        private(set) var answered = 0
        /// Written on this connection and come back unanswered (sent again).
        private(set) var unansweredCount = 0
        /// Still taking new work (false after GOAWAY, a lost connection or shutdown).
        private(set) var open = true
        /// Closed because it had no work for `apns_connection_idle` (an extra connection; no backoff, no alarm).
        private(set) var closedIdle = false

        /// - Parameter retry: what the last connection left, sent first.
        init(retry: [QueuedNotification] = []) { self.retry = retry }

        /// The connection is open: it allows `window` in flight (capped by `push_window`), and the last connection's end
        /// left `limit` (``nextLimit(after:)``).
        mutating func connected(window: Int, limit: Int) {
            ceiling = max(1, window)
            self.limit = max(1, min(limit, ceiling))
        }

        /// Rows claimed for this connection.
        /// Claimed rows join the rows ready to write; a broadcast's wait behind the others (a chat message claimed
        /// while a connection holds a batch of a broadcast is written before that batch).
        mutating func claimed(_ rows: [QueuedNotification]) {
            guard let firstBulk = ready.firstIndex(where: \.bulk), rows.contains(where: { !$0.bulk }) else {
                ready += rows
                return
            }
            ready.insert(contentsOf: rows.lazy.filter { !$0.bulk }, at: firstBulk)
            ready += rows.lazy.filter(\.bulk)
        }

        /// Answered rows to send again first (a refreshed provider token, a gateway's processing error).
        mutating func retryFirst(_ rows: [QueuedNotification]) { retry += rows }

        /// No new work: GOAWAY or shutdown. What is in flight is still answered.
        mutating func stop() { open = false }

        /// The destination cannot make credentials now (a provider token it cannot sign, an access token the token
        /// URI will not give): the connection stops taking work, and the next one waits out a backoff.
        private(set) var credentialsUnavailable = false

        mutating func cannotAuthenticate() {
            credentialsUnavailable = true
            open = false
        }

        /// No work for `apns_connection_idle` on an extra connection: it closes, to open again on demand.
        mutating func closeIdle() {
            closedIdle = true
            open = false
        }

        /// The far end refused our credentials on this connection (said once per connection, not per row).
        private(set) var credentialsLogged = false

        /// Whether this is the connection's first refusal of our credentials.
        mutating func credentialsRefused() -> Bool {
            defer { credentialsLogged = true }
            return !credentialsLogged
        }

        /// How the connection ended (nil while it is open).
        private(set) var ending: LinkEnding?

        /// The connection ended; whether it was still taking work.
        mutating func ended(_ ending: LinkEnding) -> Bool {
            defer { open = false }
            self.ending = ending
            return open
        }

        /// The next connection's starting limit (see ``nextLimit(after:)``).
        var nextLimit: Int { nextLimit(after: ending ?? .dropped) }

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
        mutating func withdraw(_ count: Int) { settle(count) }

        /// `count` requests in flight are no longer: never more than were (a request settled twice would free a
        /// place that is still taken, and the connection would go past what the far end allows).
        private mutating func settle(_ count: Int) {
            precondition(count >= 0 && count <= inFlight, "settling \(count) requests with \(inFlight) in flight")
            inFlight -= count
        }

        /// The connection did not take `items`: they go first on the next connection, and this one stops.
        mutating func notTaken(_ items: [QueuedNotification]) {
            settle(items.count)
            retry += items
            open = false
        }

        /// `count` requests were answered (whatever the verdicts): they free their places and grow the limit.
        mutating func answered(_ count: Int) {
            settle(count)
            answered += count
            if count > 0, limit < ceiling { limit = min(ceiling, limit + max(1, count / 2)) }
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
            settle(items.count)
            unansweredCount += items.count
            retry += items
        }

        /// What the far end allows now (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS), capped by `window`; returns the
        /// new limit.
        mutating func allow(_ allowed: Int, window: Int) -> Int {
            ceiling = max(1, min(allowed, window))
            limit = ceiling
            return limit
        }

        /// The next connection's starting limit, by how this one ended. A connection that dropped with requests in
        /// flight leaves it unknown how much arrived: start small again (half of what was lost, or one when nothing
        /// was ever answered), so a far end that keeps dropping after a few requests still lets every row through.
        /// One that stopped reading starts at half. Otherwise the limit stays.
        func nextLimit(after ending: LinkEnding) -> Int {
            switch ending {
            case .dropped where unansweredCount > 0:
                answered > 0 ? max(1, min(limit, unansweredCount) / 2) : 1
            case .stalled:
                max(1, min(limit, max(unansweredCount, 1)) / 2)
            case .dropped, .orderly, .refused:
                limit
            }
        }

        /// Every stream this connection may use is busy (fewer than a quarter free) while rows wait for one: one
        /// connection carries no more, another would.
        var isSaturated: Bool {
            open && limit > 1 && limit - inFlight < max(1, limit / 4) && !(retry.isEmpty && ready.isEmpty)
        }

        /// Nothing in flight, nothing waiting.
        var isIdle: Bool { inFlight == 0 && retry.isEmpty && ready.isEmpty }

        /// Whether the claimer should claim more: fewer rows ready than a window's worth (at least half a batch, at
        /// most a batch: a wide window is not claimed ahead whole, the rows would wait under lease that another
        /// daemon could send).
        func wantsClaim(batchSize: Int) -> Bool { open && ready.count < min(max(limit, batchSize / 2), batchSize) }

        /// What goes to the next connection, oldest first.
        var unsent: [QueuedNotification] { (retry + ready).sorted { $0.messageID < $1.messageID } }

        // MARK: The driver's tasks ask; the state answers what to do

        /// What the writer does next (``writerStep(batchSize:idleClose:stopping:now:)``).
        enum WriterStep: Equatable {
            /// Encode and write these rows: they are in flight from now.
            case write([QueuedNotification])
            /// Nothing to write: wait for a change (rows claimed, answers, the session closing, shutdown), at most
            /// until `deadline` (nil: nothing is due at any moment; a safety wait).
            case wait(until: ContinuousClock.Instant?)
            /// Write nothing more: wait for the answers in flight (``isDrained``), then hang up.
            case finish
        }

        /// Since when nothing has been in flight and nothing waiting (for the idle close; nil while there is work).
        private(set) var idleSince: ContinuousClock.Instant?

        /// The writer is ready for work at `now`: what it does. `stopping`: shutdown was asked (no new work; what is
        /// in flight is still answered). `idleClose`: how long the connection may go without work before it closes
        /// (an extra or on-demand connection; nil: it stays open).
        mutating func writerStep(
            batchSize: Int,
            idleClose: Duration?,
            stopping: Bool,
            now: ContinuousClock.Instant
        ) -> WriterStep {
            if stopping { stop() }
            guard open else { return .finish }
            let batch = nextBatch(batchSize: batchSize)
            guard batch.isEmpty else {
                idleSince = nil
                return .write(batch)
            }
            if retry.isEmpty && ready.isEmpty && inFlight < limit { writerWaited = true }
            guard let idleClose, isIdle else {
                idleSince = nil
                return .wait(until: nil)
            }
            let since = idleSince ?? now
            idleSince = since
            guard since + idleClose > now else {
                closeIdle()
                return .finish
            }
            return .wait(until: since + idleClose)
        }

        /// After ``WriterStep/finish``: every request written has been answered or given back.
        var isDrained: Bool { inFlight == 0 }

        /// What the claimer does next (``claimStep(batchSize:)``).
        enum ClaimStep: Equatable {
            /// Claim up to a batch: fewer rows are ready than the connection will want.
            case claim
            /// Enough is ready: wait for the writer to take some (or the session to close).
            case wait
            /// The session takes no new work: claim nothing more.
            case stop
        }

        /// The writer had places free and no row to write since the claim under way started: the claims, not the
        /// far end, are the connection's pace (``ClaimSize``).
        private(set) var writerWaited = false

        /// The claimer is ready, with claims of `batchSize` rows: what it does. A claim that starts begins a new
        /// watch of the writer (``writerWaited``).
        mutating func claimStep(batchSize: Int) -> ClaimStep {
            guard open else { return .stop }
            guard wantsClaim(batchSize: batchSize) else { return .wait }
            writerWaited = false
            return .claim
        }

        /// What the driver does once the connection has ended (``afterwards``).
        enum Afterwards: Equatable {
            /// It closed for want of work: open again when there is some, no backoff, no alarm.
            case idle
            /// Connect again after a backoff; `progressed`: it did work (answers, or an orderly end), so the backoff
            /// starts over. Credentials that could not be made never count as progress (no claim-and-release spin).
            case reconnect(progressed: Bool)
        }

        var afterwards: Afterwards {
            closedIdle ? .idle : .reconnect(progressed: (answered > 0 || ending == .orderly) && !credentialsUnavailable)
        }
    }

    private let state: NIOLockedValueBox<State>
    /// Any change (answers, sends, claims).
    let wake = QueueSignal()
    /// The session stopped taking new work (GOAWAY, connection lost, shutdown).
    let closing = QueueSignal()

    init(_ state: State) { self.state = NIOLockedValueBox(state) }

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
